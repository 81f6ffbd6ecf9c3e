"""Enhanced fan-out on aiobotocore: :class:`AsyncFanOut`, the Consumer's twin of :class:`.fanout.FanOut`.

The same calls, errors and event decoding as the botocore version (every
pure part lives in :mod:`.fanout`); only the awaiting differs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from botocore.exceptions import ClientError

from ..errors import ResourceNotFoundError
from ..positions import Position
from .async_kinesis import AsyncKinesisClient
from .boundary import acall
from .fanout import (
    ConsumerDescription,
    FanOutEvent,
    _code,
    _limit_or_rate,
    _not_active_yet,
    _stream_error,
    _wait_timeout,
    consumer_from,
    decoded_event,
    fanout_error,
    is_error_message,
    subscribe_policy,
    subscribe_request,
)

T = TypeVar("T")


def _aguarded(
    what: str, endpoint: str, fn: Callable[[], Awaitable[T]], subscribing: bool = False
) -> Callable[[], Awaitable[T]]:
    async def attempt() -> T:
        try:
            return await fn()
        except Exception as exc:
            mapped = fanout_error(exc, what, endpoint, subscribing=subscribing)
            if mapped is None:
                raise
            raise mapped from exc

    return attempt


class AsyncFanOut:
    """:class:`FanOut` on an open :class:`AsyncKinesisClient` (``async with`` it first)."""

    def __init__(self, kinesis: AsyncKinesisClient) -> None:
        self._kinesis = kinesis
        self.endpoint = kinesis.endpoint

    async def _call(self, what: str, fn: Callable[[], Awaitable[T]], *, subscribing: bool = False) -> T:
        policy = self._kinesis.settings.retry
        if subscribing:
            policy = subscribe_policy(policy)
        return await acall(what, self.endpoint, policy, _aguarded(what, self.endpoint, fn, subscribing))

    async def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        """See :meth:`FanOut.register_consumer`."""
        what = f"RegisterStreamConsumer {name!r} on {stream_arn}"
        client = self._kinesis.botocore_client

        async def register() -> dict[str, Any]:
            try:
                return (await client.register_stream_consumer(StreamARN=stream_arn, ConsumerName=name))["Consumer"]
            except ClientError as exc:
                if _code(exc) == "ResourceInUseException":
                    try:
                        out = await client.describe_stream_consumer(StreamARN=stream_arn, ConsumerName=name)
                    except ClientError as missing:
                        if _code(missing) == "ResourceNotFoundException":
                            raise _not_active_yet(what) from exc
                        raise
                    return out["ConsumerDescription"]
                if _code(exc) == "LimitExceededException":
                    listed = await client.list_stream_consumers(StreamARN=stream_arn, MaxResults=100)
                    raise _limit_or_rate(what, stream_arn, listed.get("Consumers", [])) from exc
                raise

        consumer = consumer_from(await self._call(what, register))
        return await self.wait_active(consumer.arn, timeout_s=timeout_s)

    async def wait_active(
        self, consumer_arn: str, *, timeout_s: float = 60.0, poll_s: float = 0.5
    ) -> ConsumerDescription:
        deadline = time.monotonic() + timeout_s
        while True:
            consumer = await self.describe_consumer(consumer_arn)
            if consumer.status == "ACTIVE":
                return consumer
            if time.monotonic() > deadline:
                raise _wait_timeout(consumer, timeout_s, self.endpoint)
            await asyncio.sleep(poll_s)

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
        client = self._kinesis.botocore_client
        consumers: list[ConsumerDescription] = []
        request: dict[str, Any] = {"StreamARN": stream_arn, "MaxResults": 100}
        seen: set[str] = set()
        while True:
            out = await self._call(
                f"ListStreamConsumers of {stream_arn}", lambda req=request: client.list_stream_consumers(**req)
            )
            page = [consumer_from(c) for c in out.get("Consumers", ())]
            consumers.extend(page)
            token = out.get("NextToken")
            if not token or not page or token in seen:
                return consumers
            seen.add(token)
            request = {"StreamARN": stream_arn, "NextToken": token, "MaxResults": 100}

    async def subscribe(
        self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None
    ) -> AsyncIterator[FanOutEvent]:
        """See :meth:`FanOut.subscribe`; an async generator (``async for event in fanout.subscribe(...)``)."""
        what, request = subscribe_request(consumer_arn, shard_id, position, stream_arn)
        client = self._kinesis.botocore_client
        out = await self._call(what, lambda: client.subscribe_to_shard(**request), subscribing=True)
        stream = out["EventStream"]
        try:
            messages = stream._event_generator  # below aiobotocore's parse: see decoded_event
            while True:
                try:
                    message = await messages.__anext__()
                    event = decoded_event(message)
                    if event is None and is_error_message(message):
                        await stream._parse_event(message)  # an error message: aiobotocore raises it
                except StopAsyncIteration:
                    return
                except Exception as exc:  # translated, never swallowed
                    raise _stream_error(exc, what, self.endpoint) from exc
                if event is not None:
                    yield event
                    if event.shard_ended:
                        return
        finally:
            stream.close()


__all__ = ["AsyncFanOut"]
