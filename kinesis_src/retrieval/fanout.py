"""The sync enhanced fan-out driver: SubscribeToShard events moving a :class:`.cursor.ShardCursor`.

Used by Spark tasks (``consumerMode=efo``). Each event's page goes through
the same cursor as a GetRecords page, so de-aggregation, the cuts at a
recorded end (replay), the record cap and SHARD_END behave exactly as with
polling. What is the driver's own:

* **subscriptions.** One is opened at the cursor's position on the first
  step, and again whenever one ends (AWS ends each after 5 minutes), a page
  was cut short (the subscription is past what was kept), or the event
  stream broke off. A bounded read closes its subscription when it stops.
* **where to resubscribe** (:func:`resubscribe_position`): after the last
  record delivered; from LATEST, the continuation is adopted once the
  service names one, so records put between two subscriptions are not
  skipped.

There is no pacing: the service pushes at most 2 MB/s per shard to each
consumer, and no Kinesis-side call limit applies between events.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator

from ..aws.fanout import FanOut, FanOutEvent
from ..errors import ConfigurationError, EndpointUnreachableError
from ..positions import Position, PositionKind
from .bounded import MAX_RECORDS_PER_FETCH, BoundedRead, ShardRead
from .cursor import NO_END, ReadEnd, ShardCursor, Step

log = logging.getLogger(__name__)

BROKEN_SUBSCRIPTIONS = 5  # event streams breaking off in a row, with no event between: give up
BROKEN_BACKOFF_S = 1.0

__all__ = ["FanOutReader", "ShardRead", "resubscribe_position"]


def resubscribe_position(position: Position, continuation: str | None) -> Position:
    """Where the next subscription starts: the cursor's position, but LATEST becomes the continuation.

    A cursor that has delivered nothing is still at its start. For
    TRIM_HORIZON and AT_TIMESTAMP that start is still right; for LATEST it
    would skip whatever arrived while no subscription was open, so the
    service's continuation (the point it had reached) takes its place.
    ``"0"`` is no position: LocalStack names it before the first record.
    """
    if position.kind is PositionKind.LATEST and continuation and continuation.strip("0"):
        return Position.after_sequence(continuation)
    return position


class FanOutReader(BoundedRead):
    """Bounded reads of one shard over enhanced fan-out; one per shard and task, not thread-safe.

    ``consumer_arn`` is a registered, ACTIVE consumer of the stream (the
    Spark driver registers it). ``max_records_per_fetch`` only sets the
    caught-up judgement's page size: events are as large as the service
    makes them.
    """

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
        self.consumer_arn = consumer_arn
        self.stream = stream
        self.stream_arn = stream_arn
        self.shard_id = shard_id
        self.cursor = ShardCursor(stream, shard_id, start, strict_aggregation=strict_aggregation)
        self.max_records_per_fetch = max_records_per_fetch
        self._clock = clock
        self._sleep = sleep
        self._events: Iterator[FanOutEvent] | None = None
        self._continuation: str | None = None
        self._broken = 0
        self.subscriptions = 0

    def step(self, limit: int | None = None, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        """The next event, as the cursor judged it (``limit`` is GetRecords'; events have none)."""
        if self.cursor.ended:
            raise ConfigurationError(f"shard {self.shard_id} already reached SHARD_END; nothing more to read")
        event = self._next_event()
        self._continuation = event.continuation_sequence_number
        step = self.cursor.accept(event.page, end, max_records)
        if step.reacquire or self.cursor.ended:
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
                self._events = self._subscribe()
            try:
                event = next(self._events)
            except StopIteration:  # the service ended the subscription (5 minutes): open the next one
                self._events = None
                continue
            except EndpointUnreachableError as exc:
                self._events = None
                self._broken += 1
                if self._broken >= BROKEN_SUBSCRIPTIONS:
                    raise
                log.info("shard %s: event stream broke off (%s); resubscribing at %s", self.shard_id, exc, self.position)
                self._sleep(BROKEN_BACKOFF_S * self._broken)
                continue
            self._broken = 0
            return event

    def _subscribe(self) -> Iterator[FanOutEvent]:
        position = resubscribe_position(self.position, self._continuation)
        self.subscriptions += 1
        log.debug("shard %s: subscribing at %s (subscription %d)", self.shard_id, position, self.subscriptions)
        return self.fanout.subscribe(self.consumer_arn, self.shard_id, position, stream_arn=self.stream_arn)
