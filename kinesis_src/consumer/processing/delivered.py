"""What a processing handler receives: the Kinesis record plus its delivery count.

:class:`~kinesis_src.records.Record` is a frozen value shared with every
other reader (Spark, ``read_table``, batches), so the count is not added to
it. The handler gets a :class:`DeliveredRecord` instead: a small frozen
wrapper that answers every field of the record (``record.data``,
``record.partition_key``, ``record.sequence_number``...) and adds
``delivery_count``. ``record.record`` is the plain :class:`Record`, for
code that wants exactly that type.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...records import Record


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """One delivery of one record to a handler.

    ``delivery_count`` is 1 on the first delivery. It counts this worker's
    attempts at the record, plus one for every earlier holder of the shard's
    lease since its last checkpoint (the lease's
    ``ownerSwitchesSinceCheckpoint`` less this holder's own take): those
    holders received the record too, and may have been working on it when
    they stopped.
    """

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
