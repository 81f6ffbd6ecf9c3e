"""Enhanced fan-out on aiobotocore: :class:`AsyncFanOut`, the twin of :class:`.fanout.FanOut`.

The same calls, errors and event decoding as the botocore version; only the awaiting differs."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from ..errors import ResourceNotFoundError
from ..positions import Position
from .boundary import acall
from .fanout_calls import ActiveWait, Call, adrive, listing_plan, register_plan
from .fanout_errors import event_stream, mapped_errors
from .fanout_events import astream_events
from .fanout_model import (
    ConsumerDescription,
    FanOutEvent,
    KinesisCalls,
    consumer_from,
    subscribe_policy,
    subscribe_request,
)

T = TypeVar("T")


class AsyncFanOut:
    """:class:`FanOut` on an open :class:`AsyncKinesisClient` (``async with`` it first)."""

    def __init__(self, kinesis: KinesisCalls) -> None:
        self._kinesis = kinesis
        self.endpoint = kinesis.endpoint

    async def _call(self, what: str, fn: Callable[[], Awaitable[T]], *, subscribing: bool = False) -> T:
        policy = self._kinesis.settings.retry
        if subscribing:
            policy = subscribe_policy(policy)

        async def attempt() -> T:
            with mapped_errors(what, self.endpoint, subscribing=subscribing):
                return await fn()

        return await acall(what, self.endpoint, policy, attempt)

    def _client_call(self, request: Call) -> Awaitable[Any]:
        return request.on(self._kinesis.botocore_client)

    async def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        """See :meth:`FanOut.register_consumer`."""
        what = f"RegisterStreamConsumer {name!r} on {stream_arn}"
        raw = await self._call(what, lambda: adrive(register_plan(stream_arn, name, what), self._client_call))
        return await self.wait_active(consumer_from(raw).arn, timeout_s=timeout_s)

    async def wait_active(
        self, consumer_arn: str, *, timeout_s: float = 60.0, poll_s: float = 0.5
    ) -> ConsumerDescription:
        wait = ActiveWait.starting_now(self.endpoint, timeout_s)
        consumer = await self.describe_consumer(consumer_arn)
        while not wait.done(consumer):
            await asyncio.sleep(poll_s)
            consumer = await self.describe_consumer(consumer_arn)
        return consumer

    async def describe_consumer(self, consumer_arn: str) -> ConsumerDescription:
        what = f"DescribeStreamConsumer {consumer_arn}"
        client = self._kinesis.botocore_client
        out = await self._call(what, lambda: client.describe_stream_consumer(ConsumerARN=consumer_arn))
        return consumer_from(out["ConsumerDescription"])

    async def deregister_consumer(self, consumer_arn: str) -> bool:
        what = f"DeregisterStreamConsumer {consumer_arn}"
        client = self._kinesis.botocore_client
        try:
            await self._call(what, lambda: client.deregister_stream_consumer(ConsumerARN=consumer_arn))
        except ResourceNotFoundError:
            return False
        return True

    async def list_consumers(self, stream_arn: str) -> list[ConsumerDescription]:
        what = f"ListStreamConsumers of {stream_arn}"
        return await adrive(listing_plan(stream_arn), lambda page: self._call(what, lambda: self._client_call(page)))

    async def subscribe(
        self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None
    ) -> AsyncIterator[FanOutEvent]:
        """See :meth:`FanOut.subscribe`; an async generator (``async for event in fanout.subscribe(...)``)."""
        what, request = subscribe_request(consumer_arn, shard_id, position, stream_arn)
        client = self._kinesis.botocore_client
        out = await self._call(what, lambda: client.subscribe_to_shard(**request), subscribing=True)
        with event_stream(out["EventStream"], what, self.endpoint) as stream:
            async for event in astream_events(stream):
                yield event
                if event.shard_ended:
                    return


__all__ = ["AsyncFanOut"]
