"""Read one shard from a position until a record limit, a time limit, an end, or SHARD_END.

The reader hides shard iterators: callers think in :class:`Position` values.
After every page the position moves to "after the last sequence number
delivered", which is what makes two things safe: re-acquiring an expired
iterator (it restarts exactly after the last record handed out) and stopping
at an exact sequence number for a deterministic replay.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from .aws import KinesisClient
from .errors import ConfigurationError, IteratorExpiredError, MalformedResponseError
from .positions import Position, validate_sequence_number
from .records import ChildShard, RecordPage

log = logging.getLogger(__name__)

MAX_RECORDS_PER_FETCH = 10_000  # the GetRecords API maximum
MIN_FETCH_INTERVAL_S = 0.2  # Kinesis allows 5 GetRecords calls per second per shard
EXPIRED_ITERATOR_ATTEMPTS = 10  # fresh iterators expiring again and again (~14 s of backoff): give up
EXPIRED_ITERATOR_MAX_BACKOFF_S = 2.0


class StopReason(str, enum.Enum):
    RECORD_LIMIT = "record_limit"
    TIME_LIMIT = "time_limit"
    CAUGHT_UP = "caught_up"
    END_SEQUENCE = "end_sequence"
    END_TIMESTAMP = "end_timestamp"
    SHARD_END = "shard_end"


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
    throttled and backing off.
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
        self.position = start
        self.max_records_per_fetch = max_records_per_fetch
        self.fetch_interval_s = fetch_interval_s
        self.shard_ended = False
        self.child_shards: tuple[ChildShard, ...] = ()
        self.millis_behind_latest: int | None = None
        self._iterator: str | None = None
        self._clock = clock
        self._sleep = sleep
        self._last_call: float | None = None

    # -- one call ----------------------------------------------------------------

    def fetch(self, limit: int | None = None) -> RecordPage:
        """One GetRecords call from the current position; moves the position past what it returns."""
        if self.shard_ended:
            raise ConfigurationError(f"shard {self.shard_id} already reached SHARD_END; nothing more to fetch")
        limit = min(limit or self.max_records_per_fetch, self.max_records_per_fetch)
        self._pace()
        if self._iterator is None:
            self._iterator = self.kinesis.get_shard_iterator(self.stream, self.shard_id, self.position)
        for attempt in range(1, EXPIRED_ITERATOR_ATTEMPTS + 1):
            try:
                page = self._get(limit)
                break
            except IteratorExpiredError:
                if attempt == EXPIRED_ITERATOR_ATTEMPTS:
                    raise
                log.info(
                    "iterator for shard %s of %r expired; resuming from %s", self.shard_id, self.stream, self.position
                )
                if attempt > 1:  # fresh iterators expiring too: back off (a burst of service trouble)
                    self._sleep(min(EXPIRED_ITERATOR_MAX_BACKOFF_S, 0.1 * 2 ** (attempt - 1)))
                self._pace()
                self._iterator = self.kinesis.get_shard_iterator(self.stream, self.shard_id, self.position)
        self._advance(page)
        return page

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

    def _advance(self, page: RecordPage) -> None:
        if len(page):
            self.position = Position.after_sequence(page.sequence_numbers[-1])
        self._iterator = page.next_iterator
        self.millis_behind_latest = page.millis_behind_latest
        if page.next_iterator is None:
            self.shard_ended = True
            self.child_shards = page.child_shards

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
        """
        end = int(validate_sequence_number(end_sequence)) if end_sequence is not None else None
        end_ts = end_timestamp.timestamp() if end_timestamp is not None else None
        start = self.position
        started = self._clock()
        pages: list[RecordPage] = []
        count = 0
        reason = self._already_stopped(end)
        while reason is None:
            remaining = None if max_records is None else max_records - count
            before = self.position
            page = self.fetch(remaining)
            page, reason = self._trim_to_end(page, end, end_ts, before)
            pages.append(page)
            count += len(page)
            reason = reason or self._stop_reason(page, count, started, max_records, max_duration_s, until_caught_up)
        return ShardRead(
            shard_id=self.shard_id,
            start=start,
            next_position=self.position,
            pages=pages,
            stop_reason=reason,
            millis_behind_latest=self.millis_behind_latest,
            child_shards=self.child_shards,
        )

    def _already_stopped(self, end: int | None) -> StopReason | None:
        if self.shard_ended:
            return StopReason.SHARD_END
        seq = self.position.sequence_number
        if end is not None and seq is not None and int(seq) >= end:
            return StopReason.END_SEQUENCE
        return None

    def _trim_to_end(
        self, page: RecordPage, end: int | None, end_ts: float | None, before: Position
    ) -> tuple[RecordPage, StopReason | None]:
        if not len(page):
            return page, None
        keep, reason = len(page), None
        if end is not None and int(page.sequence_numbers[-1]) >= end:
            keep = sum(1 for s in page.sequence_numbers if int(s) <= end)
            reason = StopReason.END_SEQUENCE
        if end_ts is not None:
            late = next((i for i, t in enumerate(page.arrival_epoch) if t is not None and t > end_ts), None)
            if late is not None and late < keep:
                keep, reason = late, StopReason.END_TIMESTAMP
        if keep < len(page):
            page = page.slice(keep)
            # The iterator points past records we dropped: restart after the kept ones.
            self._iterator = None
            self.shard_ended = False
            self.child_shards = ()
            self.position = Position.after_sequence(page.sequence_numbers[-1]) if keep else before
        return page, reason

    def _stop_reason(
        self,
        page: RecordPage,
        count: int,
        started: float,
        max_records: int | None,
        max_duration_s: float | None,
        until_caught_up: bool,
    ) -> StopReason | None:
        if self.shard_ended:
            return StopReason.SHARD_END
        if max_records is not None and count >= max_records:
            return StopReason.RECORD_LIMIT
        if until_caught_up and _at_tip(page, self.max_records_per_fetch):
            return StopReason.CAUGHT_UP
        if max_duration_s is not None and self._clock() - started >= max_duration_s:
            return StopReason.TIME_LIMIT
        return None


def _at_tip(page: RecordPage, limit: int) -> bool:
    """A page that was not full and says it is 0 ms behind (or does not say, and is empty)."""
    if page.millis_behind_latest is None:
        return len(page) == 0
    return page.millis_behind_latest == 0 and len(page) < limit
