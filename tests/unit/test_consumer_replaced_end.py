"""The SHARD_END write of a holding replaced while it waited is fenced on that holding's lease (#23).

The last batch's SHARD_END write waits for a worker thread; meanwhile the
worker is declared dead and adopts the lease again (counter + 1), and the
consumer replaces the holding: the new one reads the shard again from the
last checkpoint. Looked up by shard id, the old holding's write took the new
lease and landed, ending the shard under the new holding, which went on
delivering the parent's last records after the children had become
assignable (duplicates, out of per-key order). Fenced on the lease it held,
the write is refused, and the new holding reads the shard to its end and
ends it.

A replaced holding whose SHARD_END write ran out of retries gives nothing
back: the lease the coordinator holds now is the new holding's.

The first test runs the consumer on the fake Kinesis with a real
LeaseCoordinator on moto, whose cycles and renewal it runs on the event loop
(its listener is the stream reader).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_harness import make_consumer, make_lease, only, run, take, until
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.shard_state import ShardPhase
from kinesis_src.errors import LeaseLostError, RetriesExhaustedError, ThrottledError
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease
from kinesis_src.leases.table import LeaseTable
from lineage import HashRange
from tests.unit.test_consumer_shard_paths import SHARD, closed_shard
from tests.unit.test_leases_coordinator import FAST, TIMING, Clock, table_for

CHILD = "shardId-000000000003"


@pytest.fixture
def dynamodb(dummy_credentials: None) -> Iterator[DynamoDBClient]:
    with serialized_mock_aws():  # the SHARD_END write runs on a worker thread
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))
        LeaseTable(client, "leases-unit", "app", "orders").ensure_table()
        yield client


def gate_shard_ended(coordinator: LeaseCoordinator) -> threading.Event:
    """``ashard_ended`` waits for the returned event before it looks at the lease: the write queued
    behind busy ones."""
    gate = threading.Event()
    ashard_ended = coordinator.ashard_ended

    async def waits(*args: Any, **kwargs: Any) -> Any:
        assert await asyncio.to_thread(gate.wait, 5), "the test never opened the SHARD_END gate"
        return await ashard_ended(*args, **kwargs)

    coordinator.ashard_ended = waits  # type: ignore[method-assign]
    return gate


def test_a_shard_end_written_after_its_holding_was_replaced_is_refused_and_the_new_holding_ends_it(
    dynamodb: DynamoDBClient,
) -> None:
    async def scenario() -> None:
        consumer, _ = make_consumer(closed_shard([1]))
        reader = only(consumer)
        clock = Clock()
        table = table_for(dynamodb)
        table.create_lease(Lease(SHARD, Checkpoint.trim_horizon(), HashRange(0, 100)))
        coordinator = LeaseCoordinator(table, "me", timing=TIMING, clock=clock, listener=reader, held=reader.held)
        coordinator.register()
        reader.coordinator = coordinator
        assert coordinator.run_once().acquired == [SHARD]
        first = coordinator.lease(SHARD)
        last = await consumer.__anext__()
        assert last.ends_shard
        gate = gate_shard_ended(coordinator)
        checkpoint = asyncio.create_task(last.checkpoint())
        await until(lambda: reader.holdings.get(SHARD).state.phase is ShardPhase.ENDING, "the SHARD_END write")
        old = reader.holdings.get(SHARD)

        table.declare_worker_dead(table.list_workers()["me"])  # another worker, while the write waits
        assert coordinator.renewal.renew() is HeartbeatStatus.DECLARED_DEAD and coordinator.is_live()
        clock.advance(TIMING.scan_s)
        assert coordinator.run_once().acquired == [SHARD]  # adopted again: counter + 1
        new = reader.holdings.get(SHARD)
        assert new is not old and new.lease.counter == first.counter + 1
        assert old.state.phase is ShardPhase.LOST and new.state.phase is ShardPhase.FETCHING

        gate.set()
        (outcome,) = await asyncio.gather(checkpoint, return_exceptions=True)
        lease = table.get_lease(SHARD)
        assert not lease.checkpoint.is_shard_end, (
            f"the replaced holding's SHARD_END landed on the new lease (counter {lease.counter}) while the "
            f"new holding reads the shard (phase {new.state.phase.value})"
        )
        assert isinstance(outcome, LeaseLostError), outcome
        assert (lease.owner, lease.counter) == ("me", first.counter + 1)
        assert reader.holdings.get(SHARD) is new and coordinator.lease(SHARD).counter == first.counter + 1

        again = await asyncio.wait_for(consumer.__anext__(), 5)  # the new holding reads it again and ends it
        assert [r.sequence_number for r in again.records] == ["00001"] and again.ends_shard
        await again.checkpoint()
        ended = table.get_lease(SHARD)
        assert ended.checkpoint.is_shard_end and ended.owner is None
        assert table.get_lease(CHILD) is not None and consumer.held_shards() == []

    run(scenario)


def test_a_replaced_holding_whose_shard_end_ran_out_of_retries_does_not_give_the_new_holding_back() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(closed_shard([1]))
        reader = only(consumer)
        take(reader, make_lease(SHARD, counter=1, hash_range=HashRange(0, 100)))
        last = await consumer.__anext__()
        assert last.ends_shard
        coordinator.end_gate = threading.Event()
        coordinator.end_errors[SHARD] = RetriesExhaustedError("SHARD_END: retries ran out", ThrottledError("throttled"))
        checkpoint = asyncio.create_task(last.checkpoint())
        await until(lambda: reader.holdings.get(SHARD).state.phase is ShardPhase.ENDING, "the SHARD_END write")
        take(reader, make_lease(SHARD, counter=3, hash_range=HashRange(0, 100)))  # re-taken meanwhile
        new = reader.holdings.get(SHARD)
        coordinator.end_gate.set()
        with pytest.raises(LeaseLostError):
            await asyncio.wait_for(checkpoint, 5)
        assert coordinator.released == [], "the replaced holding gave back the lease of the new one"
        assert reader.holdings.get(SHARD) is new and new.state.phase is not ShardPhase.LOST

    run(scenario)
