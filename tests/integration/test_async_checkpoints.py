"""Checkpoints written on the Consumer's event loop by the async DynamoDB client (DynamoDB Local).

Heartbeats and the heartbeats' Query: tests/integration/test_async_lease_calls.py.

The async write must be the synchronous one's twin: the same fenced item, the
same answer to a lost lease, the same error for a missing table; and a running
Consumer must write its checkpoints through it, not on a worker thread.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from lease_fixtures import (  # noqa: F401  (fixtures)
    dynamodb_fixture,
    held_lease,
    make_stream,
    stored_lease,
    table_name_fixture,
)

from kinesis_src import Consumer, LeaseTiming
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.async_dynamodb import AsyncDynamoDBClient, usable
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.errors import LeaseLostError, LeaseTableNotFoundError
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable


def test_the_async_checkpoint_writes_what_the_sync_one_writes(dynamodb: DynamoDBClient, table_name: str) -> None:
    table = LeaseTable(dynamodb, table_name, "app", "orders")
    table.ensure_table()
    sync_lease, async_lease = held_lease(table, "shard-a", "w1"), held_lease(table, "shard-b", "w1")
    checkpoint = Checkpoint.sequence("49590338271490256608559692538361571095921575989136588898", 3)

    async def write() -> Lease:
        async with AsyncDynamoDBClient(dynamodb.settings) as client:
            lease = await table.acheckpoint(client, async_lease, checkpoint)
            assert client.requests["UpdateItem"] == 1
            return lease

    by_sync, by_async = table.checkpoint(sync_lease, checkpoint), asyncio.run(write())
    assert by_async.checkpoint == by_sync.checkpoint == checkpoint
    assert (by_async.owner, by_async.counter) == (by_sync.owner, by_sync.counter) == ("w1", sync_lease.counter)
    by_async_item, by_sync_item = (stored_lease(dynamodb, table, shard) for shard in ("shard-b", "shard-a"))
    assert by_async_item == by_sync_item and "checkpoint" in by_sync_item


def test_an_async_checkpoint_of_a_lost_lease_is_refused_naming_the_new_owner(
    dynamodb: DynamoDBClient, table_name: str,
) -> None:
    table = LeaseTable(dynamodb, table_name, "app", "orders")
    table.ensure_table()
    mine = held_lease(table, "shard-a", "w1")
    assert table.take_lease(mine, "w2") is not None  # stolen

    async def write() -> None:
        async with AsyncDynamoDBClient(dynamodb.settings) as client:
            await table.acheckpoint(client, mine, Checkpoint.sequence("1"))

    with pytest.raises(LeaseLostError, match="w2"):
        asyncio.run(write())
    assert table.get_lease("shard-a").checkpoint == Checkpoint.trim_horizon()  # type: ignore[union-attr]


def test_an_async_write_to_a_missing_table_names_it(dynamodb: DynamoDBClient) -> None:
    async def write() -> None:
        async with AsyncDynamoDBClient(dynamodb.settings) as client:
            await client.update_item("no-such-table", {"pk": {"S": "x"}, "sk": {"S": "y"}}, "SET a = :a",
                                     values={":a": {"S": "b"}})

    with pytest.raises(LeaseTableNotFoundError, match="'no-such-table' does not exist"):
        asyncio.run(write())


def test_a_consumer_writes_its_checkpoints_on_its_loop(dynamodb: DynamoDBClient) -> None:
    assert usable(dynamodb.settings)
    stream = f"async-cp-{uuid.uuid4().hex[:6]}"
    kinesis = KinesisClient(dynamodb.settings)
    make_stream(kinesis, stream, 1)
    kinesis.put_records(stream, [(f"k{i}", b"x") for i in range(20)])

    async def consume() -> tuple[int, int, int, int]:
        async with Consumer(stream, application_name=stream, idle_interval_s=0.05, handle_signals=False,
                            lease_timing=LeaseTiming(failover_s=3, renew_interval_s=1)) as consumer:
            seen = checkpoints = 0
            async with asyncio.timeout(30):
                while seen < 20:
                    batch = await consumer.__anext__()
                    seen += len(batch.records)
                    await batch.checkpoint()
                    checkpoints += 1
            assert consumer.handout.dynamodb is not None
            requests = consumer.handout.dynamodb.requests
            (reader,) = consumer.readers.values()
            renewal = reader.coordinator.renewal  # type: ignore[union-attr]
            async with asyncio.timeout(10):  # one heartbeat at least, at the next renewal
                while renewal.renewals < 1:
                    await asyncio.sleep(0.05)
            renewals = renewal.renewals
            return checkpoints, requests["UpdateItem"], renewals, requests["Query"]

    checkpoints, written_on_loop, heartbeats, queries = asyncio.run(consume())
    assert checkpoints >= 1 and heartbeats >= 1
    # the take of the one shard and the heartbeats, too, on the loop: every heartbeat answered, and
    # perhaps one sent and not answered yet
    take = 1
    assert checkpoints + take + heartbeats <= written_on_loop <= checkpoints + take + heartbeats + 1
    assert queries >= 1  # the coordinator's reads of the heartbeats
