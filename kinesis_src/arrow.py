"""The record schema as Arrow, and decoded pages converted into Arrow batches, column-wise.

Shared by the Spark source and :mod:`kinesis_src.window`; outside ``spark/``, so no pyspark.
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

TIMESTAMP = pa.timestamp("us", tz="UTC")


def page_to_arrow(page: RecordPage, stream: str, shard_id: str) -> pa.RecordBatch:
    """One GetRecords page as a batch of :data:`ARROW_SCHEMA`; arrival times rounded to microseconds."""
    n = len(page)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(page.partition_keys, pa.string()),
            binary_column(page.data),
            _same(stream, n),
            _same(shard_id, n),
            pa.array(page.sequence_numbers, pa.string()),
            _sub_sequence_numbers(page),
            arrival_micros(pa.array(page.arrival_epoch, pa.float64())),
        ],
        schema=ARROW_SCHEMA,
    )


JOIN_FROM = 768
"""Typical record size, in bytes, from which :func:`binary_column` joins instead of using Arrow's builder."""
_ZERO = pa.array([0], pa.int32())
_MAX_OFFSET = 2**31 - 1


def binary_column(values: list[bytes]) -> pa.Array:
    """``pa.array(values, pa.binary())``, built the faster way for the page's typical record."""
    n = len(values)
    if not n or _typical_size(values) < JOIN_FROM:
        return pa.array(values, pa.binary())
    lengths = pa.array(map(len, values), pa.int64(), size=n)
    ends = pc.cumulative_sum(lengths)
    if ends[-1].as_py() > _MAX_OFFSET:  # past int32 offsets: the builder's own way (it chunks)
        return pa.array(values, pa.binary())
    offsets = pa.concat_arrays([_ZERO, ends.cast(pa.int32())])
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(b"".join(values))])


def _typical_size(values: list[bytes]) -> int:
    return sorted((len(values[0]), len(values[len(values) // 2]), len(values[-1])))[1]


def arrival_micros(seconds: pa.Array) -> pa.Array:
    """Epoch seconds (float64) as a UTC timestamp, rounded to the microsecond."""
    micros = pc.cast(pc.round(pc.multiply(seconds, 1_000_000.0)), pa.int64())
    return micros.cast(TIMESTAMP)


def _same(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n) if n else pa.array([], pa.string())


def _sub_sequence_numbers(page: RecordPage) -> pa.Array:
    if page.sub_sequence_numbers is not None:
        return pa.array(page.sub_sequence_numbers, pa.int64())
    n = len(page)
    return pa.repeat(pa.scalar(0, pa.int64()), n) if n else pa.array([], pa.int64())
