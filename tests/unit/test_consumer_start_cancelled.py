"""A cancelled ``Consumer.start()`` leaves no lease coordinator running (#23).

``start()`` starts each reader's lease coordinator on a worker thread. A
cancellation (``asyncio.wait_for``'s timeout, a shutdown) reaches the
``await``, not the thread: the coordinator it is starting finishes starting
later. Once the cancelled start has settled, nothing of this worker may
heartbeat or hold leases. Here the Consumer runs on moto's DynamoDB and the
fake Kinesis, its only coordinator's start held at a gate while the start is
cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws
from thread_leaks import lease_threads

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.unit_readers import UnitReaders
from kinesis_src.consumer.units import FULL
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy

APP, STREAM, WORKER = "app", "orders", "starter"
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)
DEADLINE_S = 20.0


@pytest.fixture
def dynamodb(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoDBClient]:
    """Stream "orders" (two shards) on the fake; moto for the lease table."""
    fake = FakeKinesis()
    fake.create_stream(STREAM, shard_count=2)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():
        yield DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))


class GatedStart:
    """A coordinator's start held at a gate in its first cycle (``astart`` has registered and runs its
    renewal task by then): ``entered`` once a start waits, ``left`` once it returned or failed.

    The gate opens when the cancelled ``start()`` has finished, or when the consumer waits for its
    starts under way to end (``UnitReaders.drain``): whichever comes first, so the test neither
    deadlocks a consumer that waits nor gives one that does not the time to see a running coordinator.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.gate, self.left = threading.Event(), threading.Event(), threading.Event()
        self.coordinators: list[LeaseCoordinator] = []
        first_cycle, drain = LeaseCoordinator._first_cycle, UnitReaders.drain
        gated = self

        async def held_first_cycle(coordinator: LeaseCoordinator, *args: Any, **kwargs: Any) -> None:
            gated.coordinators.append(coordinator)
            gated.entered.set()
            try:
                assert await asyncio.to_thread(gated.gate.wait, DEADLINE_S), "the test never opened the start gate"
                await first_cycle(coordinator, *args, **kwargs)
            finally:
                gated.left.set()

        async def opening_drain(units: UnitReaders) -> None:
            gated.gate.set()
            await drain(units)

        monkeypatch.setattr(LeaseCoordinator, "_first_cycle", held_first_cycle)
        monkeypatch.setattr(UnitReaders, "drain", opening_drain)

    def stop_leftovers(self) -> None:
        """Stop whatever coordinator a faulty start left running, so later tests do not inherit it."""
        for coordinator in self.coordinators:
            if coordinator.running:
                asyncio.run(coordinator.astop(release=True))


def heartbeats(dynamodb: DynamoDBClient) -> set[str]:
    return set(LeaseTable(dynamodb, default_table_name(APP), APP, STREAM, scope=str(FULL)).list_workers())


def held_leases(dynamodb: DynamoDBClient) -> dict[str, str | None]:
    table = LeaseTable(dynamodb, default_table_name(APP), APP, STREAM, scope=str(FULL))
    return {lease.shard_id: lease.owner for lease in table.list_leases() if lease.owner == WORKER}


def test_a_start_cancelled_while_a_coordinator_starts_leaves_no_coordinator_running(
    dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedStart(monkeypatch)
    consumer = Consumer(STREAM, application_name=APP, region="us-east-1", worker_id=WORKER, lease_timing=TIMING,
                        handle_signals=False, idle_interval_s=0.05)

    async def scenario() -> None:
        task = asyncio.create_task(consumer.start())
        assert await asyncio.to_thread(gated.entered.wait, DEADLINE_S), "the coordinator's start never began"
        task.cancel()
        await asyncio.wait({task}, timeout=DEADLINE_S)
        assert task.done(), "the cancelled start never settled"
        gated.gate.set()  # a start that did not wait for its coordinator: let that coordinator run now
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(asyncio.wait_for(scenario(), 2 * DEADLINE_S))
        assert gated.left.wait(DEADLINE_S), "the gated coordinator start never returned"
        running = [c.worker_id for c in gated.coordinators if c.running]
        threads = sorted(t.name for t in lease_threads() if t.name.endswith(WORKER))
        assert (running, threads) == ([], []), f"still running after the cancelled start: {running}, {threads}"
        assert heartbeats(dynamodb) == set(), "the worker's heartbeat outlived its cancelled start"
        assert held_leases(dynamodb) == {}, "leases still held by the worker after its cancelled start"
    finally:
        gated.stop_leftovers()
