"""Decoding waits while a lease write is under way (kinesis_src/consumer/writes.py explains the GIL convoy).

Three links, each tested where it lives: the Consumer's acknowledgements
count their writes; the count holds ``quiet()`` back (never longer than its
bound); and the Kinesis client's parser awaits ``before_decode`` before it
decodes a GetRecords body, so a page fetched meanwhile is not decoded until
the write is over.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from pathlib import Path

import pytest
from consumer_harness import make_consumer, make_lease, only, run, until
from fake_kinesis import FakeKinesis

from kinesis_src import AwsSettings, Position
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.consumer.writes import WritesUnderWay
from kinesis_src.retry import RetryPolicy
from lineage import HashRange

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_endpoint.py"
_spec = importlib.util.spec_from_file_location("replay_endpoint", _PATH)
replay = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("replay_endpoint", replay)  # dataclasses resolve annotations through sys.modules
_spec.loader.exec_module(replay)

SHARD = "shardId-000000000001"
RANGE = HashRange(0, 100)


def test_quiet_returns_at_once_without_writes_and_waits_for_the_last_one_to_end() -> None:
    async def scenario() -> None:
        writes = WritesUnderWay(max_wait_s=60)
        await writes.quiet()
        assert writes.held_back == 0
        with writes.writing():
            with writes.writing():
                waiter = asyncio.create_task(writes.quiet())
                await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert not waiter.done()  # one write is still under way
        await asyncio.wait_for(waiter, 5)
        assert writes.count == 0 and writes.held_back == 1

    run(scenario)


def test_quiet_gives_up_waiting_after_its_bound_so_fetching_never_stops() -> None:
    async def scenario() -> None:
        writes = WritesUnderWay(max_wait_s=0.01)
        with writes.writing():
            await asyncio.wait_for(writes.quiet(), 5)  # returns although the write is not over
            assert writes.count == 1

    run(scenario)


def test_a_decode_waiting_for_quiet_is_cancelled_even_when_the_write_ends_at_the_same_moment() -> None:
    """close() cancels the fetch tasks right after the application's last checkpoint ends; the cancel must
    not be lost to the wake-up (asyncio.wait_for in Python 3.11 returns the result then, and the fetch
    task polled on forever while close() waited for it)."""

    async def scenario() -> None:
        writes = WritesUnderWay(max_wait_s=60)
        with writes.writing():
            waiter = asyncio.create_task(writes.quiet())
            await asyncio.sleep(0)  # waiting now
        waiter.cancel()  # the write ended in the same step
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiter, 5)

    run(scenario)


def test_decoding_waits_for_a_write_only_while_the_application_has_a_batch_to_go_on_with() -> None:
    async def scenario() -> None:
        queued = [True]
        writes = WritesUnderWay(max_wait_s=60, has_work=lambda: queued[0])
        with writes.writing():
            waiter = asyncio.create_task(writes.quiet())
            await asyncio.sleep(0)
            assert not waiter.done()
            queued[0] = False  # the application took the last queued batch
            writes.wake()
            await asyncio.wait_for(waiter, 5)  # the write is still under way
            await asyncio.wait_for(writes.quiet(), 5)  # and nothing to hold back for now

    run(scenario)


def test_the_consumer_holds_decoding_back_only_while_batches_are_queued() -> None:
    async def scenario() -> None:
        fake = FakeKinesis()
        fake.create_stream("orders", listing=[listing(1, 0, 100)])
        for seq in (1, 2):
            fake.put_record("orders", "k", b"x", shard_id=SHARD, sequence_number=f"{seq:05d}")
        fake.shard("orders", SHARD).page_sizes = [1, 1]
        consumer, _ = make_consumer(fake, prefetch_batches=2)
        only(consumer).on_acquired(make_lease(SHARD, hash_range=RANGE))
        await until(lambda: consumer.handout.queue.qsize() == 2, "both batches to be queued")
        assert consumer.handout.writes.has_work()
        await consumer.__anext__()
        assert consumer.handout.writes.has_work()
        await consumer.__anext__()
        assert not consumer.handout.writes.has_work()

    run(scenario)


def test_a_write_that_fails_still_ends() -> None:
    async def scenario() -> None:
        writes = WritesUnderWay(max_wait_s=60)
        with pytest.raises(RuntimeError), writes.writing():
            raise RuntimeError("DynamoDB said no")
        await asyncio.wait_for(writes.quiet(), 5)
        assert writes.count == 0

    run(scenario)


def one_record_stream(*, closed: bool) -> FakeKinesis:
    """Stream "orders": one shard holding one record; ``closed``: it ends after it (child shard 2)."""
    fake = FakeKinesis()
    parent = listing(1, 0, 100, ending="99999" if closed else None)
    fake.create_stream("orders", listing=[parent, *([listing(2, 0, 100, (1,))] if closed else [])])
    fake.put_record("orders", "k", b"x", shard_id=SHARD, sequence_number="00001")
    return fake


def test_a_checkpoint_write_counts_as_under_way_while_it_runs() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(one_record_stream(closed=False))
        only(consumer).on_acquired(make_lease(SHARD, hash_range=RANGE))
        batch = await consumer.__anext__()
        coordinator.checkpoint_gate = threading.Event()
        checkpoint = asyncio.create_task(batch.checkpoint())
        await until(lambda: consumer.handout.writes.count == 1, "the checkpoint write to be under way")
        coordinator.checkpoint_gate.set()
        await checkpoint
        assert consumer.handout.writes.count == 0 and coordinator.writes == [(SHARD, "00001")]

    run(scenario)


def test_a_shard_end_write_counts_as_under_way_while_it_runs() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(one_record_stream(closed=True))
        only(consumer).on_acquired(make_lease(SHARD, hash_range=RANGE))
        batch = await consumer.__anext__()
        await until(lambda: batch.ends_shard, "the fetcher to see the end")
        coordinator.end_gate = threading.Event()
        checkpoint = asyncio.create_task(batch.checkpoint())
        await until(lambda: consumer.handout.writes.count == 1, "the SHARD_END write to be under way")
        coordinator.end_gate.set()
        await checkpoint
        assert consumer.handout.writes.count == 0 and coordinator.writes[-1][1].startswith("SHARD_END")

    run(scenario)


@pytest.fixture(scope="module")
def endpoint():
    with replay.ReplayEndpoint(shards=1, records_per_shard=50, size=32, mode="thread") as ep:
        yield ep


def test_the_async_client_decodes_a_get_records_body_only_after_before_decode(dummy_credentials, endpoint) -> None:
    async def scenario() -> None:
        gate, asked = asyncio.Event(), []

        async def before_decode() -> None:
            asked.append(True)
            await gate.wait()

        settings = AwsSettings(region="us-east-1", endpoint_url=endpoint.endpoint_url,
                               retry=RetryPolicy(max_attempts=1, deadline_s=5))
        async with AsyncKinesisClient(settings, before_decode=before_decode) as kinesis:
            shard = endpoint.stream.shards[0].shard_id
            iterator = await kinesis.get_shard_iterator(endpoint.stream_name, shard, Position.trim_horizon())
            assert asked == []  # only GetRecords bodies wait
            fetch = asyncio.create_task(kinesis.get_records(iterator, 100, shard, endpoint.stream_name))
            await until(lambda: bool(asked), "the body to arrive at the parser")
            await asyncio.sleep(0)
            assert not fetch.done()
            gate.set()
            page = await fetch
        assert len(page) == 50

    run(scenario)
