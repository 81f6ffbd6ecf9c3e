"""One Consumer reading several streams (kinesis-mock + DynamoDB Local): each with its own lineage,
leases and checkpoints, every batch naming its stream.

What "exactly once" means here: every record put is delivered once in the
first run (one consumer, every batch checkpointed, no failure), and a
restart delivers only what was put after the checkpoints, so across both
runs every record is delivered exactly once. Per stream and key, counters
come out strictly increasing: a parent's records before its children's,
separately in each stream, through a split in one and a merge in the other.

Streams, reshards and keyed data come from our testing kit's fixtures
(``kinesis_stream_factory``, ``kinesis_resharder``, ``kinesis_keyed_producer``);
each stream's deliveries are also checked with its ``verify_delivery``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable

import pytest

from kinesis_src import BlockingConsumer, Consumer, LeaseTiming
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ConfigurationError, StreamNotFoundError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.testing import KeyedProducer, Resharder, StreamFactory, decode, verify_delivery

pytestmark = pytest.mark.integration

APP = "multi-stream-tests"
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)
Delivered = list[tuple[str, str, int]]  # (stream, key, counter) in delivery order
Producers = Callable[..., KeyedProducer]


def consumer_of(streams: list[str], app: str, **options) -> Consumer:
    """One lease table for the module; each test its own application (the stream list is per application)."""
    return Consumer(streams, application_name=app, lease_table_name=default_table_name(APP), lease_timing=TIMING,
                    idle_interval_s=0.1, handle_signals=False, **options)


async def consume(consumer: Consumer, delivered: Delivered, done: Callable[[], bool], timeout_s: float) -> None:
    """Deliver and checkpoint every batch until ``done()``; every record must name its batch's stream."""
    async with asyncio.timeout(timeout_s):
        while not done():
            batch = await consumer.__anext__()
            assert batch.stream in consumer.config.streams
            for record in batch.records:
                assert record.stream == batch.stream and record.shard_id == batch.shard_id
                key, n = decode(record.data)
                delivered.append((batch.stream, key, n))
            await batch.checkpoint()


def expected(producers: dict[str, KeyedProducer]) -> set[tuple[str, str, int]]:
    return {(stream, key, n) for stream, p in producers.items() for key, n in p.expected()}


def assert_in_order(delivered: Delivered) -> None:
    """Per stream and key, counters strictly increase in delivery order (parents before children)."""
    last: dict[tuple[str, str], int] = {}
    for stream, key, n in delivered:
        assert n > last.get((stream, key), 0), f"{stream}: {key}:{n} after {key}:{last[(stream, key)]}"
        last[(stream, key)] = n


def verify_each_stream(delivered: Delivered, producers: dict[str, KeyedProducer]) -> None:
    """The kit's verifier on each stream's deliveries (exactly once, per-key order): its report on failure."""
    for stream, producer in producers.items():
        verify_delivery([(key, n) for s, key, n in delivered if s == stream], producer)


def test_two_streams_resharded_independently_are_consumed_exactly_once(
    emulator_env, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    kinesis_keyed_producer: Producers, caplog,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = f"{APP}-{suffix}"
    split_stream, merge_stream, added = f"ms-split-{suffix}", f"ms-merge-{suffix}", f"ms-added-{suffix}"
    kinesis_stream_factory(shards=1, name=split_stream)
    kinesis_stream_factory(shards=2, name=merge_stream)
    producers = {s: kinesis_keyed_producer(s, keys=12) for s in (split_stream, merge_stream)}
    for producer in producers.values():
        producer.put_rounds(2)
    delivered: Delivered = []

    async def first_run() -> None:
        async with consumer_of([split_stream, merge_stream], app, worker_id="m1") as consumer:
            assert set(consumer.held_shards()) >= {f"{split_stream}/shardId-000000000000"}

            def reshard_and_produce() -> None:  # on a thread while the loop consumes
                kinesis_resharder.split(split_stream, "shardId-000000000000")
                producers[split_stream].put_rounds(2)
                kinesis_resharder.merge_neighbours(merge_stream, 0)
                producers[merge_stream].put_rounds(2)

            resharding = asyncio.create_task(asyncio.to_thread(reshard_and_produce))
            want = lambda: resharding.done() and expected(producers) <= {d for d in delivered}
            await consume(consumer, delivered, want, 60)
            await resharding
            assert consumer.metrics.streams[split_stream].shards_ended == 1  # the split parent
            assert consumer.metrics.streams[merge_stream].shards_ended == 2  # both merge parents
            assert consumer.metrics.records == len(delivered)

    asyncio.run(first_run())
    assert Counter(delivered).most_common(1)[0][1] == 1, "a record was delivered twice in one run"
    assert set(delivered) == expected(producers)
    assert_in_order(delivered)
    verify_each_stream(delivered, producers)

    # Restart with the merged stream left out and a new stream added: the split stream resumes at its
    # checkpoints, the new one starts at the initial position, the removed one is no longer read.
    kinesis_stream_factory(shards=1, name=added)
    producers[added] = kinesis_keyed_producer(added, keys=5)
    producers[added].put_rounds(1)
    for stream in (split_stream, merge_stream):
        producers[stream].put_rounds(1)
    first = len(delivered)

    async def second_run() -> None:
        async with consumer_of([split_stream, added], app, worker_id="m2") as consumer:
            new = {(s, k, n) for s in (split_stream, added) for k, n in producers[s].expected()} - set(delivered)
            await consume(consumer, delivered, lambda: new <= set(delivered[first:]), 40)

    with caplog.at_level(logging.INFO, logger="kinesis_src.consumer.stream_list"):
        asyncio.run(second_run())
    assert f"no longer reads stream {merge_stream!r}" in caplog.text
    assert f"now reads stream {added!r} too" in caplog.text
    again = delivered[first:]
    assert {s for s, _, _ in again} == {split_stream, added}  # nothing from the removed stream
    assert Counter(delivered).most_common(1)[0][1] == 1, "a record was delivered again after the restart"
    assert set(again) == {(s, k, n) for s in (split_stream, added) for k, n in producers[s].expected()} - set(delivered[:first])
    assert_in_order(delivered)
    verify_each_stream(delivered, {s: producers[s] for s in (split_stream, added)})  # across both runs


def test_a_missing_stream_in_the_list_fails_the_start_naming_it_before_any_stream_is_read(
    emulator_env, kinesis_stream_factory: StreamFactory, kinesis_keyed_producer: Producers
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app, present, missing = f"{APP}-{suffix}", f"ms-present-{suffix}", f"ms-missing-{suffix}"
    kinesis_stream_factory(shards=1, name=present)
    kinesis_keyed_producer(present, keys=3).put_rounds(1)

    async def start() -> None:
        async with consumer_of([present, missing], app, worker_id="m3"):
            pytest.fail("started with a missing stream")

    with pytest.raises(StreamNotFoundError, match=missing):
        asyncio.run(start())
    table = LeaseTable(DynamoDBClient(AwsSettings.from_env()), default_table_name(APP), app, present)
    assert table.list_leases() == []  # no stream was leased, so none was read


@pytest.mark.parametrize(
    ("streams", "message"),
    [([], "empty list"), (["a", "b", "a"], "'a' more than once"), (["a", "no spaces"], "stream_name"),
     ([b"a"], "stream_name")],
)
def test_a_bad_stream_list_fails_at_construction_naming_the_option(dummy_credentials, streams, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Consumer(streams, application_name=APP)


def test_the_blocking_consumer_reads_a_list_of_streams_too(
    emulator_env, kinesis_stream_factory: StreamFactory, kinesis_keyed_producer: Producers
) -> None:
    suffix = uuid.uuid4().hex[:6]
    streams = [f"ms-blocking-a-{suffix}", f"ms-blocking-b-{suffix}"]
    producers = {}
    for stream in streams:
        kinesis_stream_factory(shards=1, name=stream)
        producers[stream] = kinesis_keyed_producer(stream, keys=4)
        producers[stream].put_rounds(2)
    seen: set[tuple[str, str, int]] = set()
    with BlockingConsumer(streams, application_name=f"{APP}-{suffix}", lease_table_name=default_table_name(APP),
                          lease_timing=TIMING, idle_interval_s=0.1) as consumer:
        watchdog = threading.Timer(30, consumer.stop)  # the loop below ends even if records never come
        watchdog.start()
        try:
            for batch in consumer:
                seen.update((r.stream, *decode(r.data)) for r in batch.records)
                batch.checkpoint()
                if seen >= expected(producers):
                    consumer.stop()
        finally:
            watchdog.cancel()
    assert seen == expected(producers)
