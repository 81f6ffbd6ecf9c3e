"""What a processing handler receives: the Kinesis record plus its delivery count.

:class:`~kinesis_src.records.Record` is a frozen value shared with every other reader, so the count
is not added to it: :class:`DeliveredRecord` wraps it, reads its fields through, and adds it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...records import Record


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """One delivery of one record to a handler; ``record.record`` is the plain :class:`Record`.

    ``delivery_count`` is 1 on the first delivery: this worker's attempts plus the earlier
    holders of the lease since its last checkpoint, who received the record too
    (docs/processing.md, "Delivery count")."""

    record: Record
    delivery_count: int

    @property
    def partition_key(self) -> str:
        return self.record.partition_key

    @property
    def data(self) -> bytes:
        return self.record.data

    @property
    def sequence_number(self) -> str:
        return self.record.sequence_number

    @property
    def sub_sequence_number(self) -> int:
        return self.record.sub_sequence_number

    @property
    def shard_id(self) -> str:
        return self.record.shard_id

    @property
    def approximate_arrival_timestamp(self) -> datetime | None:
        return self.record.approximate_arrival_timestamp

    @property
    def explicit_hash_key(self) -> str | None:
        return self.record.explicit_hash_key

    @property
    def stream(self) -> str:
        return self.record.stream

    def __getattr__(self, name: str) -> Any:
        """Fields the Record gains later read through as well."""
        return getattr(object.__getattribute__(self, "record"), name)
