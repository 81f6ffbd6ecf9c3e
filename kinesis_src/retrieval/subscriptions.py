"""One shard's fan-out subscriptions, with no I/O: what the sync and async fan-out drivers share.

:class:`ShardSubscriptions` holds the cursor, the last continuation, where to resubscribe and the
counts; each driver keeps its loop and its answer to a broken stream."""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any, Callable, Protocol

from ..aws.fanout_errors import error_code
from ..aws.fanout_model import FanOutEvent
from ..errors import SubscriptionFailedError
from ..positions import Position, PositionKind
from .cursor import NO_END, ReadEnd, ShardCursor, Step
from .pacing import doubling_s

# a subscription taken over by another reader of the consumer (ResourceInUseException on its event
# stream): pause this long before subscribing again; AWS refuses a new one within 5 s of the last anyway
TAKEN_OVER_PAUSE_S = 5.0

log = logging.getLogger(__name__)


class Subscriber(Protocol):
    """:class:`~kinesis_src.aws.FanOut` or :class:`~kinesis_src.aws.AsyncFanOut`: ``subscribe`` returns a
    generator of events (sync or async) whose call is made on the first ``next``."""

    def subscribe(self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None) -> Any:
        ...


class FanOutCounts(Protocol):
    """Where a reader counts its shards' event streams (the Consumer's
    :class:`~kinesis_src.consumer.metrics.StreamMetrics`): invisible to the application otherwise."""

    def count_resubscribe(self) -> None:
        ...

    def count_event_stream_failure(self, code: str) -> None:
        ...


def failure_code(error: BaseException | None) -> str:
    """What a failed event stream is counted under: the code AWS sent (kept by the mapped error's
    cause, or by :class:`SubscriptionFailedError`), else the error's class; ``"broken off"`` for none."""
    if error is None:
        return "broken off"
    if isinstance(error, SubscriptionFailedError):
        return error.code
    cause = error.__cause__
    return (error_code(cause) if cause is not None else None) or type(error).__name__


def resubscribe_position(position: Position, continuation: str | None) -> Position:
    """Where the next subscription starts: the cursor's position, but LATEST becomes the
    continuation (LATEST again would skip what arrived meanwhile). ``"0"`` is no position:
    LocalStack names it before the first record."""
    if position.kind is PositionKind.LATEST and continuation and continuation.strip("0"):
        return Position.after_sequence(continuation)
    return position


def backoff_s(in_a_row: int, initial_s: float, max_s: float, rand: Callable[[], float] = random.random) -> float:
    """The pause before resubscribing after ``in_a_row`` failed event streams: doubling from
    ``initial_s`` to at most ``max_s``, jittered within the upper half so shards failing together
    (an outage) do not resubscribe in step."""
    ceiling = doubling_s(initial_s, in_a_row - 1, max_s)
    return ceiling / 2 + rand() * ceiling / 2


class ShardSubscriptions:
    """A shard cursor moved by fan-out events; one per shard and driver, not thread-safe."""

    def __init__(self, consumer_arn: str, shard_id: str, cursor: ShardCursor, *, stream_arn: str | None,
                 counts: FanOutCounts | None = None) -> None:
        self.consumer_arn = consumer_arn
        self.stream_arn = stream_arn
        self.shard_id = shard_id
        self.cursor = cursor
        self.subscriptions = 0
        self.events = 0
        self.broken = 0  # event streams broken off in a row, with no event between
        self.unknown = 0  # of those, the ones failed with an error no rule knows (SubscriptionFailedError)
        self.errors: Counter[str] = Counter()  # every event stream that failed, by failure_code, since the start
        self.counts = counts
        self._continuation: str | None = None

    @property
    def position(self) -> Position:
        return self.cursor.position

    def subscribe(self, fanout: Subscriber) -> Any:
        """The next subscription's events, from where the cursor stands (no call is made yet)."""
        position = resubscribe_position(self.position, self._continuation)
        self.subscriptions += 1
        if self.subscriptions > 1 and self.counts is not None:
            self.counts.count_resubscribe()
        log.debug("shard %s: subscribing at %s (subscription %d)", self.shard_id, position, self.subscriptions)
        return fanout.subscribe(self.consumer_arn, self.shard_id, position, stream_arn=self.stream_arn)

    def accept(self, event: FanOutEvent, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        """The event's page, as the cursor judged it; its continuation is where a LATEST start resubscribes."""
        self.events += 1
        self.broken = self.unknown = 0
        self._continuation = event.continuation_sequence_number
        return self.cursor.accept(event.page, end, max_records)

    def broke_off(self, error: BaseException | None = None) -> int:
        """Count an event stream that broke off (with ``error``); how many did in a row."""
        self.broken += 1
        if isinstance(error, SubscriptionFailedError):
            self.unknown += 1
        code = failure_code(error)
        self.errors[code] += 1
        if self.counts is not None:
            self.counts.count_event_stream_failure(code)
        return self.broken

    def subscription_done(self, step: Step) -> bool:
        """The subscription cannot go on: its page was cut short (it points past the cursor) or the shard ended."""
        return step.reacquire or self.cursor.ended
