"""Enhanced fan-out against real LocalStack (host mode): consumers, subscriptions, a closed shard.

kinesis-mock alone cannot serve SubscribeToShard to botocore; the last test
pins the error kinesis-src gives for such an endpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Iterator

import pytest

from kinesis_src import AwsSettings, Position
from kinesis_src.aws import AsyncFanOut, FanOut, FanOutEvent, KinesisClient
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.errors import ConsumerStreamMismatchError, FanOutUnsupportedError, ResourceNotFoundError

pytestmark = pytest.mark.integration

SHARD0 = "shardId-000000000000"


def _stream(kinesis: KinesisClient, name: str, shards: int = 1) -> str:
    kinesis.create_stream(name, shards)
    return kinesis.wait_active(name).arn


def _put(kinesis: KinesisClient, stream: str, prefix: str, count: int) -> list[tuple[str, bytes]]:
    entries = [(f"{prefix}-{i}", f"{prefix}:{i}".encode()) for i in range(count)]
    kinesis.put_records(stream, entries)
    return entries


def _read_until(events: Iterator[FanOutEvent], count: int, timeout_s: float = 30.0) -> list[FanOutEvent]:
    """Events until ``count`` records arrived or the shard ended; fails after ``timeout_s``.

    LocalStack sends an event per poll (~1 s apart when idle), so the
    deadline is checked between events.
    """
    deadline = time.monotonic() + timeout_s
    seen: list[FanOutEvent] = []
    for event in events:
        seen.append(event)
        if sum(len(e.page) for e in seen) >= count or event.shard_ended:
            return seen
        assert time.monotonic() < deadline, f"only {sum(len(e.page) for e in seen)} of {count} records after {timeout_s}s"
    return seen


def _records(events: list[FanOutEvent]) -> list[tuple[str, bytes]]:
    return [(pk or "", data) for e in events for pk, data in zip(e.page.partition_keys, e.page.data)]


def test_register_is_idempotent_and_waits_until_active(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    fanout = FanOut(localstack_kinesis)
    first = fanout.register_consumer(arn, "billing")
    again = fanout.register_consumer(arn, "billing")
    assert first.status == again.status == "ACTIVE"
    assert first.arn == again.arn and first.name == "billing" and first.stream_arn == arn
    assert first.created is not None
    assert [c.arn for c in fanout.list_consumers(arn)] == [first.arn]
    assert fanout.describe_consumer(first.arn) == first


def test_subscribe_from_trim_horizon_and_continue(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    fanout = FanOut(localstack_kinesis)
    consumer = fanout.register_consumer(arn, "reader")
    written = _put(localstack_kinesis, stream_name, "a", 25)

    subscription = fanout.subscribe(consumer.arn, SHARD0, Position.trim_horizon(), stream_arn=arn)
    events = _read_until(subscription, len(written))
    subscription.close()
    assert _records(events) == written
    sequence_numbers = [s for e in events for s in e.page.sequence_numbers]
    assert sequence_numbers == sorted(sequence_numbers, key=int)
    assert all(isinstance(t, float) and t > 1.7e9 for e in events for t in e.page.arrival_epoch)
    last = events[-1]
    assert last.continuation_sequence_number == sequence_numbers[-1] == last.page.next_iterator
    assert not last.shard_ended and last.page.child_shards == ()

    more = _put(localstack_kinesis, stream_name, "b", 5)
    resumed = fanout.subscribe(consumer.arn, SHARD0, Position.after_sequence(last.continuation_sequence_number))
    events = _read_until(resumed, len(more))
    resumed.close()
    assert _records(events) == more


def test_async_subscribe_receives_the_records(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    written = _put(localstack_kinesis, stream_name, "x", 12)

    async def scenario() -> list[FanOutEvent]:
        async with AsyncKinesisClient(localstack_kinesis.settings) as kinesis:
            fanout = AsyncFanOut(kinesis)
            consumer = await fanout.register_consumer(arn, "async-reader")
            assert (await fanout.register_consumer(arn, "async-reader")).arn == consumer.arn
            seen: list[FanOutEvent] = []
            subscription = fanout.subscribe(consumer.arn, SHARD0, Position.trim_horizon(), stream_arn=arn)
            try:
                async with asyncio.timeout(30):
                    async for event in subscription:
                        seen.append(event)
                        if sum(len(e.page) for e in seen) >= len(written):
                            break
            finally:
                await subscription.aclose()
            assert await fanout.deregister_consumer(consumer.arn) is True
            return seen

    events = asyncio.run(scenario())
    assert _records(events) == written
    assert events[-1].continuation_sequence_number == events[-1].page.sequence_numbers[-1]


def test_closed_shard_ends_with_child_shards(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    fanout = FanOut(localstack_kinesis)
    consumer = fanout.register_consumer(arn, "resharder")
    written = _put(localstack_kinesis, stream_name, "p", 10)
    localstack_kinesis.split_shard(stream_name, SHARD0, 2**127)
    localstack_kinesis.wait_active(stream_name)

    events = _read_until(fanout.subscribe(consumer.arn, SHARD0, Position.trim_horizon()), 10**6)
    assert _records(events) == written
    last = events[-1]
    assert last.shard_ended and last.continuation_sequence_number is None and last.page.shard_ended
    children = {c.shard_id: c for c in last.page.child_shards}
    assert sorted(children) == ["shardId-000000000001", "shardId-000000000002"]
    assert all(c.parent_shards == (SHARD0,) for c in children.values())
    assert children["shardId-000000000001"].ending_hash_key + 1 == children["shardId-000000000002"].starting_hash_key

    # Resubscribing after the last record of the closed shard gets only its end.
    last_sequence = [s for e in events for s in e.page.sequence_numbers][-1]
    tail = _read_until(fanout.subscribe(consumer.arn, SHARD0, Position.after_sequence(last_sequence)), 10**6)
    assert _records(tail) == [] and tail[-1].shard_ended and len(tail[-1].page.child_shards) == 2

    # The children are open shards like any other; each gets the keys of its hash range.
    written = _put(localstack_kinesis, stream_name, "c", 6)
    for child in children.values():
        expected = [(pk, data) for pk, data in written
                    if child.starting_hash_key <= _hash_key(pk) <= child.ending_hash_key]
        subscription = fanout.subscribe(consumer.arn, child.shard_id, Position.trim_horizon())
        assert _records(_read_until(subscription, len(expected), timeout_s=10)) == expected
        subscription.close()


def _hash_key(partition_key: str) -> int:
    return int(hashlib.md5(partition_key.encode()).hexdigest(), 16)


def test_deregister_is_idempotent(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    fanout = FanOut(localstack_kinesis)
    consumer = fanout.register_consumer(arn, "short-lived")
    assert fanout.deregister_consumer(consumer.arn) is True
    with pytest.raises(ResourceNotFoundError):
        fanout.describe_consumer(consumer.arn)
    assert fanout.deregister_consumer(consumer.arn) is False
    assert fanout.list_consumers(arn) == []


def test_consumer_of_another_stream_is_refused(localstack_kinesis: KinesisClient, stream_name: str) -> None:
    arn = _stream(localstack_kinesis, stream_name)
    other = _stream(localstack_kinesis, f"{stream_name}-other")
    fanout = FanOut(localstack_kinesis)
    consumer = fanout.register_consumer(other, "shared-name")
    assert fanout.register_consumer(arn, "shared-name").arn != consumer.arn  # names are per stream
    with pytest.raises(ConsumerStreamMismatchError, match=other):
        next(fanout.subscribe(consumer.arn, SHARD0, Position.trim_horizon(), stream_arn=arn))


def test_kinesis_mock_has_no_fan_out(kinesis: KinesisClient, stream_name: str) -> None:
    """kinesis-mock registers consumers, but its SubscribeToShard answer lacks the initial-response event."""
    arn = _stream(kinesis, stream_name)
    fanout = FanOut(kinesis)
    consumer = fanout.register_consumer(arn, "efo")
    assert consumer.status == "ACTIVE"
    with pytest.raises(FanOutUnsupportedError) as caught:
        next(fanout.subscribe(consumer.arn, SHARD0, Position.trim_horizon()))
    message = str(caught.value)
    assert kinesis.endpoint in message and "LocalStack" in message and "consumerMode=polling" in message

    async def subscribe_async() -> None:
        async with AsyncKinesisClient(AwsSettings.from_env()) as client:
            subscription = AsyncFanOut(client).subscribe(consumer.arn, SHARD0, Position.trim_horizon())
            await subscription.__anext__()

    with pytest.raises(FanOutUnsupportedError):
        asyncio.run(subscribe_async())
