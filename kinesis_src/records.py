"""Value types for what a read returns: records, pages of records, child shards.

A ``RecordPage`` is columnar, as decoded and as Arrow wants it; ``Record`` objects come on demand.
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
    """The decoded body of one GetRecords response, one *user* record a row.

    ``arrival_epoch`` is epoch seconds; ``next_iterator`` is None once the shard is fully read.
    A page holds whole KPL aggregates; without one, ``sub_sequence_numbers`` and
    ``explicit_hash_keys`` are None.
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
        """One :class:`Record` per row, built column-wise (:func:`build_records`)."""
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
    """``n`` :class:`Record` objects from one column per field (field order), no frame per record.

    Equal to ``Record(...)``, which has no ``__post_init__`` to skip (docs/performance.md).
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
    """The cyclic collector off for one bulk C-level build: none of its objects is in a cycle.

    Left off if the application turned it off; covers C calls only (docs/performance.md).
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
