"""The lease coordinator's calls on the Consumer's event loop: heartbeat, reads, takes, requests, releases.

Each async call must be its synchronous twin: the same stored item and the
same answer (renewed, declared dead, replaced) for a heartbeat, the same
view for a read of the table, the same item and refusal for a take, a steal
request, a release and SHARD_END, for shard sync's lease creates, lists
and deletes, and for the key-range claims' reads,
renewals and deletes. DynamoDB Local.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Awaitable, Callable, TypeVar

import pytest
from lease_fixtures import (  # noqa: F401
    WHOLE,
    dynamodb_fixture,
    held_lease,
    stored_lease,
    table_name_fixture,
)

from kinesis_src.aws.async_dynamodb import AsyncDynamoDBClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.consumer.range_claims import RangeClaim, RangeClaims
from kinesis_src.errors import LeaseLostError
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease, WorkerHeartbeat
from kinesis_src.leases.schema.keys import worker_key
from kinesis_src.leases.table import LeaseTable
from lineage import KeyRange

T = TypeVar("T")


@pytest.fixture
def table(dynamodb: DynamoDBClient, table_name: str) -> LeaseTable:
    """A fresh lease table of application "app" on stream "orders", its layout recorded."""
    table = LeaseTable(dynamodb, table_name, "app", "orders")
    table.ensure_table()
    table.ensure_layout()
    return table


def on_loop(dynamodb: DynamoDBClient, step: Callable[[AsyncDynamoDBClient], Awaitable[T]]) -> T:
    async def run() -> T:
        async with AsyncDynamoDBClient(dynamodb.settings) as client:
            return await step(client)

    return asyncio.run(run())


def stored(dynamodb: DynamoDBClient, table: LeaseTable, worker_id: str) -> dict[str, Any]:
    """A heartbeat item as stored, less what differs between two workers' items by design."""
    item = dynamodb.get_item(table.table_name, worker_key(table.partition, worker_id)) or {}
    return {k: v for k, v in item.items() if k not in ("sk", "workerId", "session", "lastUpdated", "ttl")}


def test_the_async_heartbeat_writes_and_answers_what_the_sync_one_does(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    by_sync, by_async = table.register_worker("w1"), table.register_worker("w2")
    sync_answer = table.heartbeat(by_sync, changed=True, notify=("w3",))
    async_answer = on_loop(dynamodb, lambda c: table.aheartbeat(c, by_async, changed=True, notify=("w3",)))
    assert sync_answer[0] is async_answer[0] is HeartbeatStatus.RENEWED
    assert (sync_answer[1].heartbeat, sync_answer[1].changes) == (async_answer[1].heartbeat, async_answer[1].changes)
    assert stored(dynamodb, table, "w1") == stored(dynamodb, table, "w2")
    assert stored(dynamodb, table, "w2")["leaseNotify"] == {"L": [{"S": "w3"}]}


def test_the_async_heartbeat_learns_it_was_declared_dead_or_replaced(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    dead = table.register_worker("w1")
    assert table.declare_worker_dead(dead)
    status, _ = on_loop(dynamodb, lambda c: table.aheartbeat(c, dead))
    assert status is HeartbeatStatus.DECLARED_DEAD == table.heartbeat(dead)[0]
    old = table.register_worker("w2")
    table.register_worker("w2")  # another process took the id
    status, _ = on_loop(dynamodb, lambda c: table.aheartbeat(c, old))
    assert status is HeartbeatStatus.REPLACED == table.heartbeat(old)[0]


def test_the_async_read_of_the_heartbeats_finds_what_the_sync_one_finds(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    for i in range(3):
        table.register_worker(f"w{i}")
    other_stream = LeaseTable(dynamodb, table.table_name, "app", "payments")
    other_stream.register_worker("elsewhere")
    by_async: dict[str, WorkerHeartbeat] = on_loop(dynamodb, table.alist_workers)
    assert by_async == table.list_workers() and sorted(by_async) == ["w0", "w1", "w2"]


def test_the_async_take_request_and_release_write_what_the_sync_ones_write(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    for shard in ("shard-a", "shard-b"):
        assert table.create_lease(Lease(shard, Checkpoint.trim_horizon(), WHOLE))
    a, b = table.get_lease("shard-a"), table.get_lease("shard-b")
    assert a is not None and b is not None
    steps: list[tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = [
        (table.take_lease, table.atake_lease, ("w1",)),
        (table.request_steal, table.arequest_steal, ("w2",)),
        (table.release_lease, table.arelease_lease, ()),
    ]
    for sync_step, async_step, args in steps:
        a = sync_step(a, *args)
        b = on_loop(dynamodb, lambda c, b=b, step=async_step, args=args: step(c, b, *args))
        assert a is not None and b is not None
        assert (a.owner, a.counter, a.steal_requested_by) == (b.owner, b.counter, b.steal_requested_by)
        assert stored_lease(dynamodb, table, "shard-a") == stored_lease(dynamodb, table, "shard-b")
    stale = replace(b, counter=b.counter - 1)  # a lease changed since it was read: refused, nothing written
    assert on_loop(dynamodb, lambda c: table.atake_lease(c, stale, "w3")) is None is table.take_lease(stale, "w3")


def test_shard_sync_s_async_creates_lists_and_deletes_are_the_sync_ones(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    assert table.create_lease(Lease("shard-a", Checkpoint.trim_horizon(), WHOLE))
    assert on_loop(dynamodb, lambda c: table.acreate_lease(c, Lease("shard-b", Checkpoint.trim_horizon(), WHOLE)))
    assert stored_lease(dynamodb, table, "shard-a") == stored_lease(dynamodb, table, "shard-b")
    again = Lease("shard-a", Checkpoint.trim_horizon(), WHOLE)  # exists: refused by both, nothing written
    assert not table.create_lease(again) and not on_loop(dynamodb, lambda c: table.acreate_lease(c, again))
    assert on_loop(dynamodb, table.alist_leases) == table.list_leases()
    a, b = table.get_lease("shard-a"), table.get_lease("shard-b")
    assert a is not None and b is not None
    assert not table.delete_lease(a, only_if_shard_end=True)  # not ended: kept by both
    assert not on_loop(dynamodb, lambda c: table.adelete_lease(c, b, only_if_shard_end=True))
    assert table.delete_lease(a, only_if_shard_end=False)
    assert on_loop(dynamodb, lambda c: table.adelete_lease(c, b, only_if_shard_end=False))
    assert table.list_leases() == [] == on_loop(dynamodb, table.alist_leases)


def test_the_async_read_of_the_table_finds_what_the_sync_one_finds(dynamodb: DynamoDBClient, table_name: str) -> None:
    table = LeaseTable(dynamodb, table_name, "app", "orders", lease_partitions=3)
    table.ensure_table()
    table.ensure_layout()
    for i in range(7):
        assert table.create_lease(Lease(f"shard-{i}", Checkpoint.trim_horizon(), WHOLE))
    table.register_worker("w1")
    assert table.known_layout() is not None and table.known_partitions() == 3
    by_async = on_loop(dynamodb, table.ascan)
    assert by_async == table.scan() and len(by_async.leases) == 7 and list(by_async.workers) == ["w1"]


def test_the_async_registration_and_deletes_of_a_heartbeat_are_the_sync_ones(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    by_sync = table.register_worker("w1")
    by_async = on_loop(dynamodb, lambda c: table.aregister_worker(c, "w2"))
    assert stored(dynamodb, table, "w1") == stored(dynamodb, table, "w2") != {}
    moved = table.heartbeat(by_async)[1]  # renewed since it was seen: not declared dead
    assert not on_loop(dynamodb, lambda c: table.adeclare_worker_dead(c, by_async))
    assert on_loop(dynamodb, lambda c: table.adeclare_worker_dead(c, moved)) and "w2" not in table.list_workers()
    assert on_loop(dynamodb, lambda c: table.aderegister_worker(c, by_sync)) and table.list_workers() == {}
    assert not on_loop(dynamodb, lambda c: table.aderegister_worker(c, by_sync))  # gone already


def test_the_async_shard_end_writes_what_the_sync_one_writes(dynamodb: DynamoDBClient, table: LeaseTable) -> None:
    by_sync, by_async = held_lease(table, "p-a", "w1"), held_lease(table, "p-b", "w1")
    assert table.create_lease(Lease("c-b2", Checkpoint.trim_horizon(), WHOLE, parent_shard_ids=("p-b",)))

    def children(parent: str) -> list[Lease]:
        return [Lease(f"c-{parent[-1]}{i}", Checkpoint.trim_horizon(), WHOLE, parent_shard_ids=(parent,))
                for i in (1, 2)]

    sync_end = table.mark_shard_end(by_sync, children("p-a"))
    async_end = on_loop(dynamodb, lambda c: table.amark_shard_end(c, by_async, children("p-b")))
    assert (sync_end.created_children, async_end.created_children, async_end.existing_children) == (("c-a1", "c-a2"), ("c-b1",), ("c-b2",))
    assert (async_end.lease.owner, async_end.lease.counter) == (sync_end.lease.owner, sync_end.lease.counter)
    a, b = (stored_lease(dynamodb, table, p) for p in ("p-a", "p-b"))
    assert a.pop("childShardIds") != b.pop("childShardIds") and a == b and "checkpoint" in a
    assert {lease.shard_id for lease in table.list_leases()} == {"p-a", "p-b", "c-a1", "c-a2", "c-b1", "c-b2"}


def test_an_async_shard_end_of_a_lost_lease_is_refused_naming_the_new_owner(
    dynamodb: DynamoDBClient, table: LeaseTable,
) -> None:
    mine = held_lease(table, "p-a", "w1")
    assert table.take_lease(mine, "w2") is not None
    child = Lease("c-a1", Checkpoint.trim_horizon(), WHOLE, parent_shard_ids=("p-a",))
    with pytest.raises(LeaseLostError, match="w2"):
        on_loop(dynamodb, lambda c: table.amark_shard_end(c, mine, [child]))
    assert table.get_lease("c-a1") is None and not table.get_lease("p-a").checkpoint.is_shard_end  # type: ignore[union-attr]


def test_the_async_key_range_claim_calls_are_the_sync_ones(dynamodb: DynamoDBClient, table: LeaseTable) -> None:
    lower, upper = (RangeClaims(dynamodb, table.table_name, "app", "orders", failover_s=3.0) for _ in range(2))
    lower.claim("w1", KeyRange.slice(0, 2))
    upper.claim("w2", KeyRange.slice(1, 2))
    assert on_loop(dynamodb, lower.aread_all) == lower.read_all()
    assert on_loop(dynamodb, lower.arenew) and lower.renew()

    def claim_of(worker_id: str) -> RangeClaim:
        return next(c for c in lower.read_all()[2] if c.worker_id == worker_id)

    assert claim_of("w1").heartbeat == 2  # one renewal each way
    seen = claim_of("w2")
    assert upper.renew()  # w2's heartbeat moved since it was seen: not deleted as dead
    assert not on_loop(dynamodb, lambda c: lower.adelete_dead(c, seen))
    assert on_loop(dynamodb, lambda c: lower.adelete_dead(c, claim_of("w2")))
    assert not on_loop(dynamodb, upper.arenew) and not upper.renew()  # w2's claim is gone


def test_the_async_client_keeps_dynamodb_s_time_from_its_answers(dynamodb: DynamoDBClient, table: LeaseTable) -> None:
    """What a heartbeat's ``ttl`` written on the loop is judged by (tests/unit/test_ttl_server_time.py)."""
    async def heard(client: AsyncDynamoDBClient) -> float | None:
        assert client.server_time_s() is None  # nothing heard yet
        await table.alist_workers(client)
        return client.server_time_s()

    server_s = on_loop(dynamodb, heard)
    assert server_s is not None and abs(server_s - time.time()) < 5
