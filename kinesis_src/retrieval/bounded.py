"""A bounded read of one shard, whatever driver fetches its pages: the loop and its stop rules.

Spark tasks, ``read_table`` and ``drain_stream`` read to the first limit met; each driver supplies
only :meth:`BoundedRead.step`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Generator, TypedDict, Unpack

from ..positions import Position
from ..records import ChildShard, RecordPage
from .cursor import NO_END, ReadEnd, ShardCursor, Step, StopReason

MAX_RECORDS_PER_FETCH = 10_000  # the GetRecords API maximum


class ReadLimits(TypedDict, total=False):
    """:meth:`BoundedRead.read`'s keywords: those of :meth:`BoundedRead.iter_pages`, which it collects."""

    max_records: int | None
    max_duration_s: float | None
    until_caught_up: bool
    end_sequence: str | None
    end_timestamp: datetime | None


@dataclass
class ShardRead:
    """What one :meth:`BoundedRead.read` call delivered and where the shard stands now."""

    shard_id: str
    start: Position
    next_position: Position
    pages: list[RecordPage]
    stop_reason: StopReason
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...] = field(default_factory=tuple)

    @property
    def record_count(self) -> int:
        return sum(len(p) for p in self.pages)

    @property
    def shard_ended(self) -> bool:
        return self.stop_reason is StopReason.SHARD_END

    @property
    def last_sequence_number(self) -> str | None:
        for page in reversed(self.pages):
            if len(page):
                return page.sequence_numbers[-1]
        return None

    def records(self):  # -> Iterator[Record]
        for page in self.pages:
            yield from page.records(self.shard_id)


class BoundedRead:
    """The read loop over :meth:`step`; subclasses set ``cursor``, ``shard_id``,
    ``max_records_per_fetch`` and ``_clock``."""

    cursor: ShardCursor
    shard_id: str
    max_records_per_fetch: int
    _clock: Callable[[], float]

    def step(self, limit: int | None = None, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        raise NotImplementedError

    @property
    def position(self) -> Position:
        return self.cursor.position

    @property
    def shard_ended(self) -> bool:
        return self.cursor.ended

    @property
    def child_shards(self) -> tuple[ChildShard, ...]:
        return self.cursor.child_shards

    @property
    def millis_behind_latest(self) -> int | None:
        return self.cursor.millis_behind_latest

    def close(self) -> None:
        """Release what the driver holds open between pages (a fan-out subscription); polling holds nothing."""

    def read(self, **limits: Unpack[ReadLimits]) -> ShardRead:
        """Fetch until the first limit is met (:meth:`iter_pages`' keywords). ``end_sequence``
        (inclusive) stops exactly at a recorded position (Spark replay), ``until_caught_up`` at the
        tip, ``end_timestamp`` before the first record that arrived after it; with no limit an open
        shard reads forever. ``max_records`` never cuts a KPL aggregate."""
        start = self.position
        pages: list[RecordPage] = []
        reason = collect(self.iter_pages(**limits), pages.append)
        return ShardRead(
            shard_id=self.shard_id,
            start=start,
            next_position=self.position,
            pages=pages,
            stop_reason=reason,
            millis_behind_latest=self.millis_behind_latest,
            child_shards=self.child_shards,
        )

    def iter_pages(
        self,
        max_records: int | None = None,
        max_duration_s: float | None = None,
        until_caught_up: bool = False,
        end_sequence: str | None = None,
        end_timestamp: datetime | None = None,
    ) -> Generator[RecordPage, None, StopReason]:
        """:meth:`read`, one page at a time, each handed out before the next call; returns the stop
        reason. A Spark batch task yields each page as it comes: it holds a page, not the shard."""
        end = ReadEnd.of(end_sequence, end_timestamp)
        started = self._clock()
        count = 0
        reason = self.cursor.stopped_before_reading(end)
        while reason is None:
            remaining = None if max_records is None else max_records - count
            step = self.step(remaining, end, remaining)
            count += len(step.page)
            reason = step.stop or self._stop_reason(step, count, started, max_records, max_duration_s, until_caught_up)
            yield step.page
        return reason

    def _stop_reason(
        self,
        step: Step,
        count: int,
        started: float,
        max_records: int | None,
        max_duration_s: float | None,
        until_caught_up: bool,
    ) -> StopReason | None:
        if max_records is not None and count >= max_records:
            return StopReason.RECORD_LIMIT
        if until_caught_up and step.caught_up(self.max_records_per_fetch):
            return StopReason.CAUGHT_UP
        if max_duration_s is not None and self._clock() - started >= max_duration_s:
            return StopReason.TIME_LIMIT
        return None


def collect(pages: Generator[RecordPage, None, StopReason], sink: Callable[[RecordPage], object]) -> StopReason:
    """Hand every page of :meth:`BoundedRead.iter_pages` to ``sink``; the stop reason."""
    while True:
        try:
            page = next(pages)
        except StopIteration as done:
            return done.value
        sink(page)
