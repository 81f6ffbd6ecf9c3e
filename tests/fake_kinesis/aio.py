"""The async twin: AsyncKinesisClient's and AsyncFanOut's calls on a FakeKinesis's state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self

from kinesis_src.aws.fanout import ConsumerDescription, FanOutEvent
from kinesis_src.aws.kinesis import StreamSummary
from kinesis_src.positions import Position
from kinesis_src.records import RecordPage

from .model import Gate

if TYPE_CHECKING:
    from .client import FakeKinesis


class AsyncFakeKinesis:
    """The AsyncKinesisClient / AsyncFanOut twin of a :class:`FakeKinesis`: same state, calls and faults."""

    def __init__(self, fake: FakeKinesis) -> None:
        self.fake = fake
        self.endpoint = fake.endpoint
        self.opened = 0

    async def __aenter__(self) -> Self:
        self.opened += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.opened -= 1

    async def _enter(self, method: str, *args: Any, **kwargs: Any) -> None:
        gate = self.fake.enter(method, *args, **kwargs)
        if gate is not None:
            await gate.wait_async()

    def fan_out(self) -> Self:
        """AsyncKinesisClient.fan_out(): the twin answers the AsyncFanOut calls itself."""
        return self

    async def describe_stream(self, stream: str) -> StreamSummary:
        await self._enter("describe_stream", stream)
        return self.fake.summary(stream)

    async def list_shards(self, stream: str, page_size: int = 1000) -> list[dict[str, Any]]:
        await self._enter("list_shards", stream)
        return self.fake.listing(stream)

    async def put_record(self, stream: str, partition_key: str, data: bytes) -> dict[str, Any]:
        await self._enter("put_record", stream)
        return self.fake.put_record(stream, partition_key, data)

    async def get_shard_iterator(self, stream: str, shard_id: str, position: Position) -> str:
        await self._enter("get_shard_iterator", stream, shard_id, position)
        return self.fake.iterator(stream, shard_id, position)

    async def get_records(self, iterator: str, limit: int, shard_id: str, stream: str) -> RecordPage:
        await self._enter("get_records", stream, shard_id, limit=limit)
        page = self.fake.page(iterator, limit)
        await asyncio.sleep(0 if len(page) else self.fake.idle_delay_s)
        return page

    async def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        return self.fake.register_consumer(stream_arn, name, timeout_s=timeout_s)

    async def wait_active(self, consumer_arn: str, **_: Any) -> ConsumerDescription:
        return self.fake.describe_consumer(consumer_arn)

    async def describe_consumer(self, consumer_arn: str) -> ConsumerDescription:
        return self.fake.describe_consumer(consumer_arn)

    async def deregister_consumer(self, consumer_arn: str) -> bool:
        return self.fake.deregister_consumer(consumer_arn)

    async def list_consumers(self, stream_arn: str) -> list[ConsumerDescription]:
        return self.fake.list_consumers(stream_arn)

    async def subscribe(self, consumer_arn: str, shard_id: str, position: Position, *,
                        stream_arn: str | None = None) -> AsyncIterator[FanOutEvent]:
        items = self.fake.subscription(consumer_arn, shard_id, position, stream_arn)
        try:
            for item in items:
                if isinstance(item, Gate):
                    await item.wait_async()
                    continue
                yield item
                await asyncio.sleep(0 if len(item.page) else self.fake.idle_delay_s)
        finally:
            items.close()
