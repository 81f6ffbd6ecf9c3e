"""The sync polling driver: GetShardIterator + GetRecords moving a :class:`.cursor.ShardCursor`.

For Spark tasks, bounded reads and idle probes. Callers see :class:`Position` values, never
iterators: an expired one restarts exactly after the last record delivered."""

from __future__ import annotations

import logging
import time
from typing import Callable

from ..aws import KinesisClient
from ..errors import ConfigurationError, IteratorExpiredError, MalformedResponseError
from ..positions import Position
from ..records import RecordPage
from ..stream_ref import StreamRef
from .bounded import MAX_RECORDS_PER_FETCH, BoundedRead, ShardRead
from .cursor import NO_END, ReadEnd, ShardCursor, Step, StopReason

log = logging.getLogger(__name__)

MIN_FETCH_INTERVAL_S = 0.2  # Kinesis allows 5 GetRecords calls per second per shard

__all__ = ["MAX_RECORDS_PER_FETCH", "MIN_FETCH_INTERVAL_S", "ShardRead", "ShardReader", "StopReason"]


class ShardReader(BoundedRead):
    """Stateful reader of one shard; not thread-safe, one per shard. ``fetch_interval_s`` keeps
    calls inside the 5 calls/s per-shard limit; ``strict_aggregation`` makes a malformed aggregate
    an error, not one record passed through whole."""

    def __init__(
        self,
        kinesis: KinesisClient,
        stream: str | StreamRef,
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

    # -- one call ----------------------------------------------------------------

    def fetch(self, limit: int | None = None) -> RecordPage:
        """One GetRecords call from the current position; moves the position past what it returns."""
        return self.step(limit).page

    def step(self, limit: int | None = None, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        """One GetRecords call, as the cursor judged it (``end`` and ``max_records`` cut the page)."""
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
        step = self.cursor.accept(page, end, max_records)
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
