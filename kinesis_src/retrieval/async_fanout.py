"""The async enhanced fan-out driver: one shard's subscriptions on the event loop, moving a cursor.

:class:`.async_polling.ShardFetcher`'s contract over SubscribeToShard. Outages and transient errors
are waited out; unfixable ones fail the shard, as do many unknown ones in a row (docs/efo.md)."""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ..aws.async_fanout import AsyncFanOut
from ..errors import (
    KinesisSourceError,
    RetriesExhaustedError,
    SubscriptionBusyError,
)
from ..positions import Position
from ..records import RecordPage
from .cursor import ShardCursor
from .subscriptions import TAKEN_OVER_PAUSE_S, FanOutCounts, ShardSubscriptions, backoff_s

log = logging.getLogger(__name__)

OUTAGE_PAUSE_S = 5.0
BROKEN_PAUSE_S = 1.0  # after the first failed event stream; doubling with each in a row ...
MAX_BROKEN_PAUSE_S = 30.0  # ... to at most this
UNKNOWN_ERRORS_IN_A_ROW = 10  # unknown event-stream errors in a row, with no event between: give up


class FanOutFetcher:
    """One shard read over enhanced fan-out for the Consumer: :meth:`run` returns once the shard ended."""

    def __init__(
        self,
        fanout: AsyncFanOut,
        consumer_arn: str,
        stream: str,
        shard_id: str,
        start: Position,
        *,
        deliver: Callable[[RecordPage], Awaitable[None]],
        on_end: Callable[[RecordPage], Awaitable[None]],
        on_expired: Callable[[str, str, str], Awaitable[None]] | None = None,
        stream_arn: str | None = None,
        strict_aggregation: bool = False,
        on_deaggregated: Callable[[int, int], None] | None = None,
        counts: FanOutCounts | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.fanout = fanout
        self.start = start
        cursor = ShardCursor(stream, shard_id, start, strict_aggregation=strict_aggregation,
                             on_deaggregated=on_deaggregated)
        self.shard = ShardSubscriptions(consumer_arn, shard_id, cursor, stream_arn=stream_arn, counts=counts)
        self.deliver, self.on_end, self.on_expired = deliver, on_end, on_expired
        self._sleep = sleep

    @property
    def subscriptions(self) -> int:
        return self.shard.subscriptions

    async def run(self) -> None:
        while True:
            try:
                if await self._subscription():
                    return
            except RetriesExhaustedError as exc:
                log.warning("shard %s: %s; subscribing again in %.0fs", self.shard.shard_id, exc, OUTAGE_PAUSE_S)
                await self._sleep(OUTAGE_PAUSE_S)
            except SubscriptionBusyError as exc:  # raised by the event stream: another reader took it over
                log.info("shard %s: subscription taken over (%s); resubscribing at %s in %.0fs",
                         self.shard.shard_id, exc, self.shard.position, TAKEN_OVER_PAUSE_S)
                await self._sleep(TAKEN_OVER_PAUSE_S)
            except KinesisSourceError as exc:
                if not exc.retriable:
                    raise
                await self._broken(exc)

    async def _broken(self, error: KinesisSourceError) -> None:
        """The event stream failed (broke off, a transient or an unknown error): resubscribe after a backoff,
        or give up after too many unknown errors in a row."""
        broken = self.shard.broke_off(error)
        if self.shard.unknown >= UNKNOWN_ERRORS_IN_A_ROW:
            raise RetriesExhaustedError(
                f"shard {self.shard.shard_id} of consumer {self.shard.consumer_arn}: {self.shard.unknown} event "
                f"streams in a row failed with errors kinesis-src has no rule for, with no event between; the last: "
                f"{error}. Giving up: check the AWS Health Dashboard for Kinesis in this region, and report the "
                "code if it persists.", error,
            ) from error
        pause = backoff_s(broken, BROKEN_PAUSE_S, MAX_BROKEN_PAUSE_S)
        log.log(logging.WARNING if self.shard.unknown else logging.INFO,
                "shard %s: %s; resubscribing at %s in %.1fs (%d failed in a row)",
                self.shard.shard_id, error, self.shard.position, pause, broken)
        await self._sleep(pause)

    async def _subscription(self) -> bool:
        """Read one subscription to its end; True when the shard ended."""
        events = self.shard.subscribe(self.fanout)
        try:
            async for event in events:
                step = self.shard.accept(event)
                if step.resumed_past is not None and self.on_expired is not None:
                    await self.on_expired(self.shard.shard_id, self.start.sequence_number or "", step.resumed_past)
                if self.shard.cursor.ended:
                    await self.on_end(step.page)
                    return True
                if len(step.page) or event.page.millis_behind_latest is not None:
                    await self.deliver(step.page)  # an empty event: only the lag figure is news
        finally:
            await events.aclose()
        return False  # the service ended it (every 5 minutes): the caller opens the next
