"""The source's schema and the conversion of decoded pages into Arrow batches.

Spark's Python data source accepts ``pyarrow.RecordBatch`` from ``read()``
when its schema matches the declared one exactly (types, timezone, order);
building batches column-wise from the fast decoder's lists skips creating a
Python object per record.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..records import RecordPage

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

ARROW_SCHEMA = pa.schema(
    [
        ("partitionKey", pa.string()),
        ("data", pa.binary()),
        ("stream", pa.string()),
        ("shardId", pa.string()),
        ("sequenceNumber", pa.string()),
        ("subSequenceNumber", pa.int64()),
        ("approximateArrivalTimestamp", pa.timestamp("us", tz="UTC")),
    ]
)


def page_to_arrow(page: RecordPage, stream: str, shard_id: str) -> pa.RecordBatch:
    n = len(page)
    seconds = pa.array(page.arrival_epoch, pa.float64())
    micros = pc.cast(pc.round(pc.multiply(seconds, 1_000_000.0)), pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(page.partition_keys, pa.string()),
            pa.array(page.data, pa.binary()),
            pa.repeat(pa.scalar(stream, pa.string()), n) if n else pa.array([], pa.string()),
            pa.repeat(pa.scalar(shard_id, pa.string()), n) if n else pa.array([], pa.string()),
            pa.array(page.sequence_numbers, pa.string()),
            pa.repeat(pa.scalar(0, pa.int64()), n) if n else pa.array([], pa.int64()),
            micros.cast(pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )
