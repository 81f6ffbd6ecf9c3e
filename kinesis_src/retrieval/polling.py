"""The sync polling driver: GetShardIterator + GetRecords moving a :class:`.cursor.ShardCursor`.

Used by Spark tasks, bounded reads (``read_table``, ``drain_stream``) and
the Spark driver's idle probes. The reader hides shard iterators: callers
think in :class:`Position` values. After every page the position moves to
"after the last record delivered", which is what makes two things safe:
re-acquiring an expired iterator (it restarts exactly after the last record
handed out) and stopping at an exact sequence number for a deterministic
replay. Everything but the calls, the iterator and the sleeping is the
cursor's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from ..aws import KinesisClient
from ..errors import ConfigurationError, IteratorExpiredError, MalformedResponseError
from ..positions import Position
from ..records import ChildShard, RecordPage
from .cursor import NO_END, ReadEnd, ShardCursor, Step, StopReason

log = logging.getLogger(__name__)

MAX_RECORDS_PER_FETCH = 10_000  # the GetRecords API maximum
MIN_FETCH_INTERVAL_S = 0.2  # Kinesis allows 5 GetRecords calls per second per shard

__all__ = ["MAX_RECORDS_PER_FETCH", "MIN_FETCH_INTERVAL_S", "ShardRead", "ShardReader", "StopReason"]


@dataclass
class ShardRead:
    """What one :meth:`ShardReader.read` call delivered and where the shard stands now."""

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


class ShardReader:
    """Stateful reader of one shard; not thread-safe, one per shard.

    ``fetch_interval_s`` spaces GetRecords calls on this shard so a tight
    loop stays inside the 5 calls/s per-shard limit instead of being
    throttled and backing off. Records come out de-aggregated (one per KPL
    user record); ``strict_aggregation`` makes a malformed aggregate an
    error instead of a record passed through whole.
    """

    def __init__(
        self,
        kinesis: KinesisClient,
        stream: str,
        shard_id: str,
        start: Position,
        *,
        max_records_per_fetch: int = MAX_RECORDS_PER_FETCH,
        fetch_interval_s: float = MIN_FETCH_INTERVAL_S,
        strict_aggregation: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 1 <= max_records_per_fetch <= MAX_RECORDS_PER_FETCH:
            raise ConfigurationError(
                f"max_records_per_fetch must be within 1..{MAX_RECORDS_PER_FETCH}, got {max_records_per_fetch}"
            )
        self.kinesis = kinesis
        self.stream = stream
        self.shard_id = shard_id
        self.cursor = ShardCursor(stream, shard_id, start, strict_aggregation=strict_aggregation)
        self.max_records_per_fetch = max_records_per_fetch
        self.fetch_interval_s = fetch_interval_s
        self._iterator: str | None = None
        self._clock = clock
        self._sleep = sleep
        self._last_call: float | None = None

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

    # -- one call ----------------------------------------------------------------

    def fetch(self, limit: int | None = None) -> RecordPage:
        """One GetRecords call from the current position; moves the position past what it returns."""
        return self.step(limit).page

    def step(self, limit: int | None = None, end: ReadEnd = NO_END) -> Step:
        """One GetRecords call, as the cursor judged it (``end`` cuts the page)."""
        if self.cursor.ended:
            raise ConfigurationError(f"shard {self.shard_id} already reached SHARD_END; nothing more to fetch")
        limit = min(limit or self.max_records_per_fetch, self.max_records_per_fetch)
        self._pace()
        if self._iterator is None:
            self._iterator = self._new_iterator()
        while True:
            try:
                page = self._get(limit)
                break
            except IteratorExpiredError:
                backoff = self.cursor.iterator_expired()
                if self.cursor.expiry_exhausted:
                    raise
                log.info("iterator for shard %s of %r expired; resuming from %s", self.shard_id, self.stream, self.position)
                if backoff:  # fresh iterators expiring too: a burst of service trouble
                    self._sleep(backoff)
                self._pace()
                self._iterator = self._new_iterator()
        step = self.cursor.accept(page, end)
        self._iterator = None if step.reacquire else page.next_iterator
        return step

    def _new_iterator(self) -> str:
        return self.kinesis.get_shard_iterator(self.stream, self.shard_id, self.position)

    def _get(self, limit: int) -> RecordPage:
        assert self._iterator is not None
        self._last_call = self._clock()
        try:
            return self.kinesis.get_records(self._iterator, limit, self.shard_id, self.stream)
        except MalformedResponseError as exc:  # names the call, shard and stream already: add the position
            raise MalformedResponseError(f"{exc} (reading from {self.position})") from exc

    def _pace(self) -> None:
        if self._last_call is None:
            return
        wait = self._last_call + self.fetch_interval_s - self._clock()
        if wait > 0:
            self._sleep(wait)

    # -- bounded read ------------------------------------------------------------

    def read(
        self,
        max_records: int | None = None,
        max_duration_s: float | None = None,
        until_caught_up: bool = False,
        end_sequence: str | None = None,
        end_timestamp: datetime | None = None,
    ) -> ShardRead:
        """Fetch until the first limit is met.

        ``end_sequence`` (inclusive) makes the read stop exactly at a recorded
        position, as a Spark batch replay must; ``until_caught_up`` stops at
        the tip of an open shard (a short page with MillisBehindLatest 0).
        Without any limit the read runs to SHARD_END, which for an open shard
        means forever: callers must pass one. ``end_timestamp`` stops before
        the first record that arrived after it (bounded batch reads).
        ``max_records`` counts user records and never cuts a KPL aggregate,
        so a read may return up to one aggregate more.
        """
        end = ReadEnd.of(end_sequence, end_timestamp)
        start = self.position
        started = self._clock()
        pages: list[RecordPage] = []
        count = 0
        reason = self.cursor.stopped_before_reading(end)
        while reason is None:
            remaining = None if max_records is None else max_records - count
            step = self.step(remaining, end)
            pages.append(step.page)
            count += len(step.page)
            reason = step.stop or self._stop_reason(step, count, started, max_records, max_duration_s, until_caught_up)
        return ShardRead(
            shard_id=self.shard_id,
            start=start,
            next_position=self.position,
            pages=pages,
            stop_reason=reason,
            millis_behind_latest=self.millis_behind_latest,
            child_shards=self.child_shards,
        )

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
