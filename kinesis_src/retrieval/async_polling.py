"""The async polling driver: one shard's fetch loop on the event loop, moving a shard cursor.

Pages go to ``deliver`` (which may block: back-pressure), the shard's final page to ``on_end``.
Outages are waited out: a shard slows without stopping the consumer. Unfixable errors propagate."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from ..aws.async_kinesis import AsyncKinesisClient
from ..errors import IteratorExpiredError, RetriesExhaustedError
from ..positions import Position
from ..records import RecordPage
from .cursor import ShardCursor
from .pacing import FetchPacing

log = logging.getLogger(__name__)

OUTAGE_PAUSE_S = 5.0


class ShardFetcher:
    def __init__(
        self,
        kinesis: AsyncKinesisClient,
        stream: str,
        shard_id: str,
        start: Position,
        *,
        limit: int,
        pacing: FetchPacing,
        deliver: Callable[[RecordPage], Awaitable[None]],
        on_end: Callable[[RecordPage], Awaitable[None]],
        on_expired: Callable[[str, str, str], Awaitable[None]] | None = None,
        strict_aggregation: bool = False,
        on_deaggregated: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kinesis = kinesis
        self.stream = stream
        self.shard_id = shard_id
        self.start = start
        self.cursor = ShardCursor(
            stream, shard_id, start, strict_aggregation=strict_aggregation, on_deaggregated=on_deaggregated
        )
        self.limit = limit
        self.pacing = pacing
        self.deliver = deliver
        self.on_end = on_end
        self.on_expired = on_expired
        self.clock = clock
        self.calls = 0

    @property
    def position(self) -> Position:
        return self.cursor.position

    async def run(self) -> None:
        iterator = await self._iterator()
        while True:
            started = self.clock()
            try:
                raw = await self.kinesis.get_records(iterator, self.limit, self.shard_id, self.stream)
            except IteratorExpiredError:
                log.info("iterator of shard %s expired (slow consumer?); resuming at %s", self.shard_id, self.position)
                await asyncio.sleep(self.cursor.iterator_expired())  # never gives up: the consumer goes on
                iterator = await self._iterator()
                continue
            except RetriesExhaustedError as exc:
                await self._wait_out(exc)
                iterator = await self._iterator()
                continue
            self.calls += 1
            step = self.cursor.accept(raw)
            if step.resumed_past is not None and self.on_expired is not None:
                await self.on_expired(self.shard_id, self.start.sequence_number or "", step.resumed_past)
            if self.cursor.ended:
                await self.on_end(step.page)
                return
            if len(step.page) or raw.millis_behind_latest is not None:
                await self.deliver(step.page)  # an empty page: only the lag figure is news
            iterator = raw.next_iterator  # type: ignore[assignment]
            wait = self.pacing.delay(step.raw_records, raw.byte_count, raw.millis_behind_latest, self.clock() - started, self.limit)
            if wait > 0:
                await asyncio.sleep(wait)

    async def _iterator(self) -> str:
        """An iterator at the current position; outages are waited out, like GetRecords'."""
        while True:
            try:
                return await self.kinesis.get_shard_iterator(self.stream, self.shard_id, self.position)
            except RetriesExhaustedError as exc:
                await self._wait_out(exc)

    async def _wait_out(self, error: RetriesExhaustedError) -> None:
        log.warning("shard %s: %s; trying again in %.0fs", self.shard_id, error, OUTAGE_PAUSE_S)
        await asyncio.sleep(OUTAGE_PAUSE_S)
