"""The source's schema and the conversion of decoded pages into Arrow batches.

Spark's Python data source accepts ``pyarrow.RecordBatch`` from ``read()``
when its schema matches the declared one exactly (types, timezone, order).
The Arrow side lives in :mod:`kinesis_src.arrow` (no pyspark there), so
``SCHEMA`` here and ``ARROW_SCHEMA`` there must stay in step.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..arrow import ARROW_SCHEMA, page_to_arrow  # noqa: F401  (re-exported for tasks.py)

SCHEMA_DDL = (
    "partitionKey string, data binary, stream string, shardId string, sequenceNumber string, "
    "subSequenceNumber long, approximateArrivalTimestamp timestamp"
)

SCHEMA = StructType(
    [
        StructField("partitionKey", StringType()),
        StructField("data", BinaryType()),
        StructField("stream", StringType()),
        StructField("shardId", StringType()),
        StructField("sequenceNumber", StringType()),
        StructField("subSequenceNumber", LongType()),
        StructField("approximateArrivalTimestamp", TimestampType()),
    ]
)
