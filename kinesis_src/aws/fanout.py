"""Enhanced fan-out (EFO) on botocore: stream consumers and SubscribeToShard (docs/efo.md).

Each event is a :class:`FanOutEvent` holding a page like a poll's; the aiobotocore twin
:class:`~.async_fanout.AsyncFanOut` shares everything but the calls."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, TypeVar

from ..errors import ResourceNotFoundError
from ..positions import Position
from .boundary import call
from .fanout_calls import ActiveWait, Call, drive, listing_plan, register_plan
from .fanout_errors import consumer_limit, event_stream, fanout_error, mapped_errors
from .fanout_events import stream_events
from .fanout_model import (
    CONSUMER_LIMIT,
    ConsumerDescription,
    FanOutEvent,
    KinesisCalls,
    check_consumer_stream,
    consumer_from,
    consumer_stream_arn,
    decoded_event,
    event_from,
    is_error_message,
    starting_position,
    subscribe_policy,
    subscribe_request,
)

T = TypeVar("T")


class FanOut:
    """EFO calls on a :class:`KinesisClient`'s botocore client (same endpoint, retry policy, parser)."""

    def __init__(self, kinesis: KinesisCalls) -> None:
        self._kinesis = kinesis
        self.endpoint = kinesis.endpoint

    def _call(self, what: str, fn: Callable[[], T], *, subscribing: bool = False) -> T:
        policy = self._kinesis.settings.retry
        if subscribing:
            policy = subscribe_policy(policy)

        def attempt() -> T:
            with mapped_errors(what, self.endpoint, subscribing=subscribing):
                return fn()

        return call(what, self.endpoint, policy, attempt)

    def _client_call(self, request: Call) -> Any:
        return request.on(self._kinesis.botocore_client)

    def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        """Register ``name`` on the stream, or find it registered already; return it once ACTIVE.
        Idempotent: every worker of an application may call it at start."""
        what = f"RegisterStreamConsumer {name!r} on {stream_arn}"
        raw = self._call(what, lambda: drive(register_plan(stream_arn, name, what), self._client_call))
        return self.wait_active(consumer_from(raw).arn, timeout_s=timeout_s)

    def wait_active(self, consumer_arn: str, *, timeout_s: float = 60.0, poll_s: float = 0.5) -> ConsumerDescription:
        """Poll DescribeStreamConsumer until ACTIVE (AWS: seconds; a consumer cannot subscribe before)."""
        wait = ActiveWait.starting_now(self.endpoint, timeout_s)
        consumer = self.describe_consumer(consumer_arn)
        while not wait.done(consumer):
            time.sleep(poll_s)
            consumer = self.describe_consumer(consumer_arn)
        return consumer

    def describe_consumer(self, consumer_arn: str) -> ConsumerDescription:
        what = f"DescribeStreamConsumer {consumer_arn}"
        out = self._call(what, lambda: self._kinesis.botocore_client.describe_stream_consumer(ConsumerARN=consumer_arn))
        return consumer_from(out["ConsumerDescription"])

    def deregister_consumer(self, consumer_arn: str) -> bool:
        """Deregister; False if it was not registered (idempotent). Its subscriptions end."""
        what = f"DeregisterStreamConsumer {consumer_arn}"
        try:
            self._call(what, lambda: self._kinesis.botocore_client.deregister_stream_consumer(ConsumerARN=consumer_arn))
        except ResourceNotFoundError:
            return False
        return True

    def list_consumers(self, stream_arn: str) -> list[ConsumerDescription]:
        """Every consumer of the stream (all pages; a repeated NextToken ends the listing)."""
        what = f"ListStreamConsumers of {stream_arn}"
        return drive(listing_plan(stream_arn), lambda page: self._call(what, lambda: self._client_call(page)))

    def subscribe(
        self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None
    ) -> Iterator[FanOutEvent]:
        """Events of one subscription (at most 5 minutes), until it ends or the shard does;
        resubscribe at ``Position.after_sequence(event.continuation_sequence_number)``. Called on
        the first ``next()``; refusals are retried at least 1 s apart, errors while events arrive
        raised translated. ``stream_arn``, when given, must own the consumer."""
        what, request = subscribe_request(consumer_arn, shard_id, position, stream_arn)
        client = self._kinesis.botocore_client
        out = self._call(what, lambda: client.subscribe_to_shard(**request), subscribing=True)
        with event_stream(out["EventStream"], what, self.endpoint) as stream:
            for event in stream_events(stream):
                yield event
                if event.shard_ended:
                    return


__all__ = [
    "CONSUMER_LIMIT",
    "ConsumerDescription",
    "FanOut",
    "FanOutEvent",
    "check_consumer_stream",
    "consumer_from",
    "consumer_limit",
    "consumer_stream_arn",
    "decoded_event",
    "event_from",
    "fanout_error",
    "is_error_message",
    "starting_position",
    "subscribe_policy",
    "subscribe_request",
]
