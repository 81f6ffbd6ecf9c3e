"""What ``async for batch in consumer`` yields: one shard's records, in order, and their acknowledgement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable

from ..records import Record, RecordPage

if TYPE_CHECKING:
    import pyarrow

    from .shard_state import ShardState


@dataclass(eq=False)
class Batch:
    """Records of one shard from one GetRecords call, in sequence order (one per KPL user record).

    ``await batch.checkpoint()`` acknowledges this batch and every earlier one of the shard (a
    position, as in the KCL); an older batch after a newer one changes nothing. After the lease was
    lost it raises :class:`~kinesis_src.errors.LeaseLostError` and writes nothing: the next owner
    delivers every record after the last checkpoint again. Always checkpoint a batch whose
    ``ends_shard`` is True: it writes SHARD_END, and the shard's children wait for it."""

    stream: str
    shard_id: str
    page: RecordPage
    index: int
    generation: int
    _checkpoint: Callable[[Batch, Record | None], Awaitable[None]] = field(repr=False)
    _state: ShardState | None = field(default=None, repr=False)
    _records: list[Record] | None = field(default=None, repr=False)

    @property
    def records(self) -> list[Record]:
        """Built on first use: a consumer that only needs columns (``to_arrow``) never pays for them."""
        if self._records is None:
            self._records = self.page.records(self.shard_id, self.stream)
        return self._records

    @property
    def ends_shard(self) -> bool:
        """True if this batch's checkpoint finishes the shard. Read it when deciding whether
        to checkpoint: it can turn True while the batch is in hand (the end seen just after it)."""
        return self._state is not None and self._state.covers_end(self.index)

    @property
    def delivering(self) -> bool:
        """True while the holding this batch came from still delivers (not released, lost
        or ended): work not started on a batch that stopped is better left to the next owner."""
        return self._state is None or self._state.delivering

    @property
    def owner_switches_since_checkpoint(self) -> int:
        """The lease's KCL-style count when this worker took it: holders (this one included) that
        received the records after the shard's checkpoint. 1 for the first holder after a checkpoint."""
        return self._state.owner_switches if self._state is not None else 0

    @property
    def millis_behind_latest(self) -> int | None:
        """Kinesis' lag figure from the GetRecords call that fetched this batch."""
        return self.page.millis_behind_latest

    @property
    def first_sequence_number(self) -> str | None:
        """None only for the empty batch that ends a shard (see ``ends_shard``)."""
        return self.page.sequence_numbers[0] if len(self.page) else None

    @property
    def last_sequence_number(self) -> str | None:
        """None only for the empty batch that ends a shard (see ``ends_shard``)."""
        return self.page.sequence_numbers[-1] if len(self.page) else None

    @property
    def byte_count(self) -> int:
        return self.page.byte_count

    def __len__(self) -> int:
        return len(self.page)

    async def checkpoint(self, record: Record | None = None) -> None:
        """Acknowledge this batch, or only its records up to and including ``record`` (one of this
        batch's ``records``). Inside a KPL aggregate that is a position between user records: a
        restart resumes at the next user record, as the KCL does."""
        await self._checkpoint(self, record)

    def to_arrow(self) -> pyarrow.RecordBatch:
        """The batch as Arrow columns, in the schema of the Spark source and ``read_table``."""
        from ..arrow import page_to_arrow

        return page_to_arrow(self.page, self.stream, self.shard_id)
