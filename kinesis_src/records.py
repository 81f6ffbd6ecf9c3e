"""Value types for what a read returns: records, pages of records, child shards.

A ``RecordPage`` is columnar (one list per field) because that is how the
fast decoder produces it and how Arrow wants it; ``Record`` objects are
built from it only for callers that iterate records one by one.
"""

from __future__ import annotations

import gc
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, Iterable, Iterator


@dataclass(frozen=True, slots=True)
class Record:
    """One Kinesis record, as the Python consumer and the demo see it."""

    partition_key: str
    data: bytes
    sequence_number: str
    sub_sequence_number: int
    shard_id: str
    approximate_arrival_timestamp: datetime | None
    explicit_hash_key: str | None = None
    """Set only for a user record of a KPL aggregate that was given one (hash-key ranges need it)."""
    stream: str = ""
    """The stream the record was read from (a consumer of several streams tells them apart by it)."""


@dataclass(frozen=True)
class ChildShard:
    """A child named in GetRecords' ``ChildShards`` when a closed shard ends."""

    shard_id: str
    parent_shards: tuple[str, ...]
    starting_hash_key: int
    ending_hash_key: int


@dataclass(frozen=True)
class RecordPage:
    """The decoded body of one GetRecords response.

    ``arrival_epoch`` holds ApproximateArrivalTimestamp exactly as the wire
    carries it (epoch seconds, float); converting to datetime is deferred
    because most pages go straight to Arrow, which wants integers.
    ``next_iterator`` is None exactly when the shard is closed and fully read.

    After KPL de-aggregation (:mod:`kinesis_src.retrieval.aggregation`) each
    row is one *user* record: ``sub_sequence_numbers`` gives its index in its
    aggregate and ``explicit_hash_keys`` its explicit hash key. Both stay
    None on a page without aggregates (every sub-sequence number is 0), so
    plain pages carry no extra columns. A page always holds whole aggregates.
    """

    partition_keys: list[str | None]
    data: list[bytes]
    sequence_numbers: list[str]
    arrival_epoch: list[float | None]
    encryption_types: list[str | None]
    next_iterator: str | None
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...] = field(default_factory=tuple)
    sub_sequence_numbers: list[int] | None = None
    explicit_hash_keys: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.sequence_numbers)

    @property
    def shard_ended(self) -> bool:
        return self.next_iterator is None

    @property
    def byte_count(self) -> int:
        return sum(map(len, self.data))

    def sub_sequence(self, index: int) -> int:
        return self.sub_sequence_numbers[index] if self.sub_sequence_numbers is not None else 0

    def records(self, shard_id: str, stream: str = "") -> list[Record]:
        """One :class:`Record` per row, built column-wise (:func:`build_records`). At 10,000 records a
        page this is the Consumer's cost per record after decoding (benchmarks/bench_consumer.py)."""
        n = len(self.sequence_numbers)
        keys = self.partition_keys
        if None in keys:
            keys = ["" if pk is None else pk for pk in keys]
        return build_records(n, (
            keys, self.data, self.sequence_numbers,
            self.sub_sequence_numbers if self.sub_sequence_numbers is not None else repeat(0, n),
            repeat(shard_id, n), arrival_datetimes(self.arrival_epoch),
            self.explicit_hash_keys if self.explicit_hash_keys is not None else repeat(None, n),
            repeat(stream, n),
        ))

    def slice(self, stop: int, start: int = 0) -> RecordPage:
        """Records ``start:stop``; used to end a replay exactly at a recorded position and to
        drop the user records of an aggregate that a checkpoint already covers."""
        return RecordPage(
            partition_keys=self.partition_keys[start:stop],
            data=self.data[start:stop],
            sequence_numbers=self.sequence_numbers[start:stop],
            arrival_epoch=self.arrival_epoch[start:stop],
            encryption_types=self.encryption_types[start:stop],
            next_iterator=self.next_iterator,
            millis_behind_latest=self.millis_behind_latest,
            child_shards=self.child_shards,
            sub_sequence_numbers=None if self.sub_sequence_numbers is None else self.sub_sequence_numbers[start:stop],
            explicit_hash_keys=None if self.explicit_hash_keys is None else self.explicit_hash_keys[start:stop],
        )


_RECORD_SLOTS = tuple(f.name for f in fields(Record))
_SET_SLOT = tuple(Record.__dict__[name].__set__ for name in _RECORD_SLOTS)
"""Each field's slot setter (its ``member_descriptor``), in field order: what ``object.__setattr__`` calls."""


def build_records(n: int, columns: tuple[Iterable[Any], ...]) -> list[Record]:
    """``n`` :class:`Record` objects from one column per field (in field order), with no Python frame per record.

    ``Record(...)`` runs the dataclass' generated ``__init__``, a Python
    frame that sets each field through ``object.__setattr__`` (it is
    frozen), which costs as much as decoding the record. Here the objects are
    allocated with ``object.__new__`` and each field is stored by its slot's
    descriptor, column by column, all in C ``map`` loops. The
    result is the same class with the same fields (equality, hash, repr,
    pickling, ``dataclasses.replace``); ``Record`` has no ``__post_init__``
    for this to skip (tests/unit/test_consumer_records.py checks both).
    """
    with gc_paused():
        records = list(map(_NEW, repeat(Record, n)))
        for set_slot, column in zip(_SET_SLOT, columns, strict=True):
            _drain(map(set_slot, records, column))
    return records


_NEW = object.__new__
_drain = deque(maxlen=0).extend
"""Runs an iterator to its end in C, keeping nothing."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for one bulk C-level build (a page's dicts or records).

    A large page triggers many young and middle collections while decoding
    and again while its records are built, for nothing: none of these objects
    is in a cycle. With the collector paused the dicts die by reference count
    unseen, and the records are scanned once, at the next collection
    (benchmarks/bench_consumer.py prints ``gc_s``; docs/performance.md). Left
    as it is when the application turned the collector off; the pause covers
    C calls only, so other threads barely see it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def arrival_datetimes(epochs: list[float | None]) -> Iterable[datetime | None]:
    """``epoch_to_datetime`` of every value; in one C-level ``map`` when none is missing."""
    if None in epochs:
        return map(epoch_to_datetime, epochs)
    return map(datetime.fromtimestamp, epochs, repeat(UTC, len(epochs)))  # type: ignore[arg-type]


def epoch_to_datetime(value: float | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC)
