"""The record schema as Arrow, and decoded pages converted into Arrow batches.

Shared by the Spark source (``spark/rows.py`` adds the matching Spark
``StructType``) and by bounded reads into a ``pyarrow.Table``
(:mod:`kinesis_src.window`). It lives outside ``spark/`` so that Arrow
output never needs pyspark. Batches are built column-wise from the fast
decoder's lists, which skips creating a Python object per record.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .records import RecordPage

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
    """One GetRecords page as a batch of :data:`ARROW_SCHEMA`; arrival times rounded to microseconds."""
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
            _sub_sequence_numbers(page),
            micros.cast(pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


def _sub_sequence_numbers(page: RecordPage) -> pa.Array:
    if page.sub_sequence_numbers is not None:
        return pa.array(page.sub_sequence_numbers, pa.int64())
    n = len(page)
    return pa.repeat(pa.scalar(0, pa.int64()), n) if n else pa.array([], pa.int64())
