"""Value types for what a read returns: records, pages of records, child shards.

A ``RecordPage`` is columnar (one list per field) because that is how the
fast decoder produces it and how Arrow wants it; ``Record`` objects are
built from it only for callers that iterate records one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterator


@dataclass(frozen=True, slots=True)
class Record:
    """One Kinesis record, as the Python consumer and the demo see it."""

    partition_key: str
    data: bytes
    sequence_number: str
    sub_sequence_number: int
    shard_id: str
    approximate_arrival_timestamp: datetime | None


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
    """

    partition_keys: list[str | None]
    data: list[bytes]
    sequence_numbers: list[str]
    arrival_epoch: list[float | None]
    encryption_types: list[str | None]
    next_iterator: str | None
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.sequence_numbers)

    @property
    def shard_ended(self) -> bool:
        return self.next_iterator is None

    @property
    def byte_count(self) -> int:
        return sum(map(len, self.data))

    def records(self, shard_id: str) -> Iterator[Record]:
        for pk, data, seq, ts in zip(
            self.partition_keys, self.data, self.sequence_numbers, self.arrival_epoch
        ):
            yield Record(
                partition_key=pk if pk is not None else "",
                data=data,
                sequence_number=seq,
                sub_sequence_number=0,
                shard_id=shard_id,
                approximate_arrival_timestamp=epoch_to_datetime(ts),
            )

    def slice(self, stop: int) -> RecordPage:
        """The first ``stop`` records; used to end a replay exactly at a recorded position."""
        return RecordPage(
            partition_keys=self.partition_keys[:stop],
            data=self.data[:stop],
            sequence_numbers=self.sequence_numbers[:stop],
            arrival_epoch=self.arrival_epoch[:stop],
            encryption_types=self.encryption_types[:stop],
            next_iterator=self.next_iterator,
            millis_behind_latest=self.millis_behind_latest,
            child_shards=self.child_shards,
        )


def epoch_to_datetime(value: float | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, timezone.utc)
