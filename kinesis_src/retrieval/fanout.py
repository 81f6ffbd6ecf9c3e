"""The sync enhanced fan-out driver, for Spark tasks: SubscribeToShard events moving a shard cursor.

A bounded read closes its subscription when it stops, and gives up after
:data:`BROKEN_SUBSCRIPTIONS` failed event streams in a row, so Spark retries the task."""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator

from ..aws.fanout import FanOut, FanOutEvent
from ..errors import ConfigurationError, KinesisSourceError, SubscriptionBusyError
from ..positions import Position
from .bounded import MAX_RECORDS_PER_FETCH, BoundedRead, ShardRead
from .cursor import NO_END, ReadEnd, ShardCursor, Step
from .subscriptions import TAKEN_OVER_PAUSE_S, ShardSubscriptions, resubscribe_position

log = logging.getLogger(__name__)

BROKEN_SUBSCRIPTIONS = 5  # event streams failing in a row, with no event between: give up
BROKEN_BACKOFF_S = 1.0

__all__ = ["FanOutReader", "ShardRead", "resubscribe_position"]


class FanOutReader(BoundedRead):
    """Bounded reads of one shard over enhanced fan-out; one per shard and task, not thread-safe.
    ``consumer_arn`` is a registered, ACTIVE consumer; ``max_records_per_fetch`` only sizes the
    caught-up judgement (events are as large as the service makes them)."""

    def __init__(
        self,
        fanout: FanOut,
        consumer_arn: str,
        stream: str,
        shard_id: str,
        start: Position,
        *,
        stream_arn: str | None = None,
        max_records_per_fetch: int = MAX_RECORDS_PER_FETCH,
        strict_aggregation: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.fanout = fanout
        self.stream = stream
        self.shard_id = shard_id
        self.cursor = ShardCursor(stream, shard_id, start, strict_aggregation=strict_aggregation)
        self.shard = ShardSubscriptions(consumer_arn, shard_id, self.cursor, stream_arn=stream_arn)
        self.max_records_per_fetch = max_records_per_fetch
        self._clock = clock
        self._sleep = sleep
        self._events: Iterator[FanOutEvent] | None = None

    @property
    def subscriptions(self) -> int:
        return self.shard.subscriptions

    def step(self, limit: int | None = None, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        """The next event, as the cursor judged it (``limit`` is GetRecords'; events have none)."""
        if self.cursor.ended:
            raise ConfigurationError(f"shard {self.shard_id} already reached SHARD_END; nothing more to read")
        step = self.shard.accept(self._next_event(), end, max_records)
        if self.shard.subscription_done(step):
            self.close()
        return step

    def read(self, *args, **kwargs) -> ShardRead:  # type: ignore[no-untyped-def]
        """:meth:`BoundedRead.read`, then the subscription is closed: a task reads once."""
        try:
            return super().read(*args, **kwargs)
        finally:
            self.close()

    def close(self) -> None:
        if self._events is not None:
            events, self._events = self._events, None
            events.close()  # type: ignore[attr-defined]

    def _next_event(self) -> FanOutEvent:
        while True:
            if self._events is None:
                self._events = self.shard.subscribe(self.fanout)
            try:
                return next(self._events)
            except StopIteration:  # the service ended the subscription (5 minutes): open the next one
                self._events = None
            except SubscriptionBusyError as exc:  # raised by the event stream: another reader took it over
                self._events = None
                if self.shard.broke_off(exc) >= BROKEN_SUBSCRIPTIONS:
                    raise
                log.info("shard %s: subscription taken over (%s); resubscribing at %s", self.shard_id, exc, self.position)
                self._sleep(TAKEN_OVER_PAUSE_S)
            except KinesisSourceError as exc:  # broke off, or a transient or unknown error on the event stream
                self._events = None
                if not exc.retriable:
                    raise
                broken = self.shard.broke_off(exc)
                if broken >= BROKEN_SUBSCRIPTIONS:
                    raise
                log.info("shard %s: event stream failed (%s); resubscribing at %s", self.shard_id, exc, self.position)
                self._sleep(BROKEN_BACKOFF_S * broken)
