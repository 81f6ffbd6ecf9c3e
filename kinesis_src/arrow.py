"""The record schema as Arrow, and decoded pages converted into Arrow batches.

Shared by the Spark source (``spark/rows.py`` adds the matching Spark
``StructType``) and by bounded reads into a ``pyarrow.Table``
(:mod:`kinesis_src.window`). It lives outside ``spark/`` so that Arrow
output never needs pyspark. Batches are built column-wise from the fast
decoder's lists, which skips creating a Python object per record.

A page decoded straight into Arrow (:class:`ArrowPage`, made by
:mod:`kinesis_src.aws.arrow_decode` for Spark tasks) carries its columns,
and :func:`page_to_arrow` uses them instead of converting the lists again
(1.3-1.5 µs a record of 200 B saved), as long as they still describe the
page: a page that was cut, filtered or de-aggregated is a new page with new
lists and takes the list path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class PageColumns:
    """A page's own columns in Arrow: what is not the same for every row of a page."""

    partition_keys: pa.Array  # string
    data: pa.Array  # binary
    sequence_numbers: pa.Array  # string
    arrival: pa.Array  # timestamp[us, UTC]


@dataclass(frozen=True)
class ArrowPage(RecordPage):
    """A :class:`RecordPage` that also holds its rows as Arrow columns, built while decoding.

    It is a whole page (every list is filled), so any reader may take it.
    ``columns_of`` is the very ``sequence_numbers`` list the columns were
    built with: ``dataclasses.replace`` with other rows makes a new list, so
    :meth:`own_columns` tells stale columns from valid ones by identity.
    """

    columns: PageColumns | None = field(default=None, compare=False, repr=False)
    columns_of: list[str] | None = field(default=None, compare=False, repr=False)

    def own_columns(self) -> PageColumns | None:
        """The columns if they describe exactly this page's rows, else None."""
        if self.columns is None or self.columns_of is not self.sequence_numbers:
            return None
        if len(self.columns.sequence_numbers) != len(self) or self.sub_sequence_numbers is not None:
            return None
        return self.columns


def page_to_arrow(page: RecordPage, stream: str, shard_id: str) -> pa.RecordBatch:
    """One GetRecords page as a batch of :data:`ARROW_SCHEMA`; arrival times rounded to microseconds."""
    n = len(page)
    own = page.own_columns() if isinstance(page, ArrowPage) else None
    if own is not None:
        keys, data, sequence_numbers, arrival = own.partition_keys, own.data, own.sequence_numbers, own.arrival
    else:
        keys = pa.array(page.partition_keys, pa.string())
        data = pa.array(page.data, pa.binary())
        sequence_numbers = pa.array(page.sequence_numbers, pa.string())
        arrival = arrival_micros(pa.array(page.arrival_epoch, pa.float64()))
    return pa.RecordBatch.from_arrays(
        [
            keys,
            data,
            _same(stream, n),
            _same(shard_id, n),
            sequence_numbers,
            _sub_sequence_numbers(page),
            arrival,
        ],
        schema=ARROW_SCHEMA,
    )


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
