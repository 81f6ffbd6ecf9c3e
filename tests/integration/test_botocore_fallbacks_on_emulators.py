"""The read path on real emulators with every private botocore member forced absent.

GetRecords on kinesis-mock: each client kind the package builds (our
session's, a caller's session's, a Spark task's, the async Consumer's with
GetRecords sent directly and through aiobotocore) reads a stream that was
split while it filled, once on today's botocore internals
and once with every check of :mod:`kinesis_src.aws.botocore_internals`
answering "missing". SubscribeToShard on LocalStack (kinesis-mock cannot
serve it to botocore): botocore's and aiobotocore's event streams, the same
way. The same records, positions, ends and children come out.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Callable

import botocore.session
import pytest

from kinesis_src.aws import AsyncFanOut, FanOut, FanOutEvent, KinesisClient
from kinesis_src.aws import botocore_internals as internals
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.aws.botocore_internals import Internal
from kinesis_src.aws.whole_body import read_bodies_whole
from kinesis_src.config import AwsSettings
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard, RecordPage
from kinesis_src.testing import Resharder, StreamFactory

pytestmark = pytest.mark.integration

Shard = tuple[list[tuple[Any, ...]], tuple[Any, ...]]  # its records, and the children its last page names


def _page_rows(page: RecordPage, shard_id: str) -> list[tuple[Any, ...]]:
    records = page.records(shard_id)
    return [(r.sequence_number, r.partition_key, r.data, r.approximate_arrival_timestamp) for r in records]


def _done(page: RecordPage) -> bool:
    return page.next_iterator is None or (not page.sequence_numbers and page.millis_behind_latest == 0)


def read_sync(kinesis: KinesisClient, stream: str) -> dict[str, Shard]:
    shards: dict[str, Shard] = {}
    for shard in kinesis.list_shards(stream):
        shard_id, got = shard["ShardId"], []
        iterator = kinesis.get_shard_iterator(stream, shard_id, Position.trim_horizon())
        while True:
            page = kinesis.get_records(iterator, 10_000, shard_id, stream)
            got += _page_rows(page, shard_id)
            if _done(page):
                break
            iterator = page.next_iterator
        shards[shard_id] = (got, page.child_shards)
    return shards


def read_async(settings: AwsSettings, stream: str, shard_ids: list[str]) -> dict[str, Shard]:
    async def run() -> dict[str, Shard]:
        shards: dict[str, Shard] = {}
        async with AsyncKinesisClient(settings) as kinesis:
            for shard_id in shard_ids:
                got: list[tuple[Any, ...]] = []
                iterator = await kinesis.get_shard_iterator(stream, shard_id, Position.trim_horizon())
                while True:
                    page = await kinesis.get_records(iterator, 10_000, shard_id, stream)
                    got += _page_rows(page, shard_id)
                    if _done(page):
                        break
                    iterator = page.next_iterator
                shards[shard_id] = (got, page.child_shards)
        return shards

    return asyncio.run(run())


def task_client(settings: AwsSettings) -> KinesisClient:
    kinesis = KinesisClient(settings)
    read_bodies_whole(kinesis.botocore_client)
    return kinesis


CLIENTS: dict[str, Callable[[AwsSettings], KinesisClient]] = {
    "ours": KinesisClient,
    "caller's session": lambda settings: KinesisClient(settings, session=botocore.session.get_session()),
    "spark task": task_client,
}


def read_every_way(settings: AwsSettings, stream: str) -> dict[str, dict[str, Shard]]:
    reads = {name: read_sync(make(settings), stream) for name, make in CLIENTS.items()}
    reads["async"] = read_async(settings, stream, sorted(reads["ours"]))  # GetRecords sent directly
    reads["async, aiobotocore"] = read_async(replace(settings, direct_get_records=False), stream, sorted(reads["ours"]))
    return reads


def test_every_fallback_reads_the_same_records_through_a_split(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = kinesis_stream_factory.create(shards=2)
    kinesis.put_records(stream, [(f"key-{i % 17}", f"before-{i}".encode() * (i % 4)) for i in range(300)])
    split = kinesis_resharder.split(stream, "shardId-000000000000")
    kinesis.put_records(stream, [(f"key-{i % 17}", f"after-{i}".encode()) for i in range(300)])

    monkeypatch.setattr(internals, "_found", {})
    fast = read_every_way(kinesis.settings, stream)
    used = {Internal.PARSE_SHAPE, Internal.CLIENT_PARSER, Internal.PARSER_SETTINGS, Internal.HTTP_SESSION}
    assert {i for i, found in internals._found.items() if found} == used  # the fast paths ran
    monkeypatch.setattr(internals, "_found", {})
    for internal in Internal:
        monkeypatch.setitem(internals._CHECKS, internal, lambda _owner: False)
    slow = read_every_way(kinesis.settings, stream)

    # the fallbacks ran (without a client parser there are no settings to carry over)
    assert set(internals._found) == used - {Internal.PARSER_SETTINGS} and not any(internals._found.values())
    expected = fast["ours"]
    assert all(read == expected for read in [*fast.values(), *slow.values()])
    assert sum(len(records) for records, _ in expected.values()) == 600
    records, children = expected["shardId-000000000000"]
    assert records and [c.shard_id for c in children] == list(split.children)


# -- SubscribeToShard on LocalStack -----------------------------------------------------------------

SHARD0 = "shardId-000000000000"
Subscription = tuple[list[tuple[Any, ...]], tuple[ChildShard, ...]]  # the shard's records, then its children


def _until_end(events: list[FanOutEvent]) -> Subscription:
    assert events and events[-1].shard_ended, "the subscription ended before the closed shard did"
    return [row for e in events for row in _page_rows(e.page, SHARD0)], events[-1].page.child_shards


def subscribe_sync(kinesis: KinesisClient, consumer_arn: str) -> Subscription:
    return _until_end(list(FanOut(kinesis).subscribe(consumer_arn, SHARD0, Position.trim_horizon())))


def subscribe_async(settings: AwsSettings, consumer_arn: str) -> Subscription:
    async def run() -> list[FanOutEvent]:
        async with AsyncKinesisClient(settings) as kinesis:
            subscription = AsyncFanOut(kinesis).subscribe(consumer_arn, SHARD0, Position.trim_horizon())
            async with asyncio.timeout(60):
                return [event async for event in subscription]

    return _until_end(asyncio.run(run()))


def test_subscribe_gives_the_same_events_without_the_event_stream_internals(
    localstack_kinesis: KinesisClient, stream_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    localstack_kinesis.create_stream(stream_name, 1)
    arn = localstack_kinesis.wait_active(stream_name).arn
    consumer = FanOut(localstack_kinesis).register_consumer(arn, "fallbacks")
    localstack_kinesis.put_records(stream_name, [(f"key-{i % 7}", f"event-{i}".encode() * (i % 3)) for i in range(40)])
    localstack_kinesis.split_shard(stream_name, SHARD0, 2**127)
    localstack_kinesis.wait_active(stream_name)

    def both() -> list[Subscription]:
        return [subscribe_sync(localstack_kinesis, consumer.arn),
                subscribe_async(localstack_kinesis.settings, consumer.arn)]

    monkeypatch.setattr(internals, "_found", {})
    fast = both()
    assert internals._found == {Internal.EVENT_MESSAGES: True, Internal.AIO_EVENT_MESSAGES: True}
    monkeypatch.setattr(internals, "_found", {})
    monkeypatch.setitem(internals._CHECKS, Internal.EVENT_MESSAGES, lambda _owner: False)
    monkeypatch.setitem(internals._CHECKS, Internal.AIO_EVENT_MESSAGES, lambda _owner: False)
    slow = both()

    assert internals._found == {Internal.EVENT_MESSAGES: False, Internal.AIO_EVENT_MESSAGES: False}
    assert fast[0] == fast[1] == slow[0] == slow[1]
    records, children = fast[0]
    assert len(records) == 40
    assert sorted(c.shard_id for c in children) == ["shardId-000000000001", "shardId-000000000002"]
