"""The source's schema and the conversion of decoded pages into Arrow batches.

``SCHEMA`` must match :mod:`kinesis_src.arrow`'s ``ARROW_SCHEMA`` exactly, or Spark refuses batches.
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
