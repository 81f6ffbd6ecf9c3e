"""Lineage and shard sync with in-process lease coordinators on kinesis-mock, and the lease table on DynamoDB Local.

Split and merge on a live stream (children only after their parents end,
each merge child created once), shard sync following UpdateShardCount and
repairing a stale table, and the table itself: the fenced SHARD_END
transaction, heartbeats and TTL, earlier layouts' checkpoints, leases
spread over partition keys. Nothing sleeps to synchronize: every wait
polls a condition with a deadline.
"""

from __future__ import annotations

import threading
import time
from typing import Sequence

import boto3
import pytest
from lease_fixtures import FAILOVER, dynamodb_fixture, make_stream, table_name_fixture  # noqa: F401  (fixtures)
from waiting import wait_for  # tests/waiting.py

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.async_dynamodb import AsyncDynamoDB
from kinesis_src.errors import LeaseLostError
from kinesis_src.leases.assignment import plan_assignment
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease, ShardEndResult
from kinesis_src.leases.shard_sync import ShardSync
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.testing import KeyedProducer, check_order
from lineage import HashRange

pytestmark = pytest.mark.integration


# -- lineage and shard sync (in-process coordinators on kinesis-mock) --------------------------


class CountingTable(LeaseTable):
    """Records every successful lease creation, to prove a merge child is created once."""

    created: list[str]

    async def acreate_lease(self, dynamodb: AsyncDynamoDB, lease: Lease) -> bool:
        ok = await super().acreate_lease(dynamodb, lease)
        if ok:
            self.created.append(lease.shard_id)
        return ok

    async def amark_shard_end(self, dynamodb: AsyncDynamoDB, lease: Lease, children: Sequence[Lease],
                              ) -> ShardEndResult:
        result = await super().amark_shard_end(dynamodb, lease, children)
        self.created.extend(result.created_children)
        return result


class MiniConsumer:
    """Reads every held shard to the tip, checkpoints, and reports SHARD_END: enough to drive lineage.

    ``before_release`` is the graceful hand-off: it waits for the shard's
    read-and-checkpoint in progress, then stops the shard, so the next owner
    starts exactly where this one stopped (no record is read twice).
    """

    def __init__(self, coordinator: LeaseCoordinator, kinesis: KinesisClient, stream: str, out: list, violations: list) -> None:
        self.coordinator, self.kinesis, self.stream = coordinator, kinesis, stream
        self.out, self.violations = out, violations
        self.readers: dict[str, ShardReader] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.stopped: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        coordinator.listener = self

    def lock(self, shard_id: str) -> threading.Lock:
        return self.locks.setdefault(shard_id, threading.Lock())

    def on_acquired(self, lease: Lease) -> None:
        for parent in lease.parent_shard_ids:
            current = self.coordinator.table.get_lease(parent)
            if current is not None and not current.is_shard_end:
                self.violations.append(f"{lease.shard_id} acquired while parent {parent} is at {current.checkpoint}")
        with self.lock(lease.shard_id):
            self.stopped.discard(lease.shard_id)
            self.readers.pop(lease.shard_id, None)

    def on_lost(self, lease: Lease, reason: str) -> None:
        self.violations.append(f"{lease.shard_id} lost: {reason}")  # nothing here should ever be taken by force
        self._stop_reading(lease)

    async def before_release(self, lease: Lease) -> None:
        self._stop_reading(lease)

    def _stop_reading(self, lease: Lease) -> None:
        with self.lock(lease.shard_id):
            self.stopped.add(lease.shard_id)
            self.readers.pop(lease.shard_id, None)

    def run(self) -> None:
        while not self.stop.is_set():
            for shard_id, lease in sorted(self.coordinator.held().items()):
                with self.lock(shard_id):
                    if shard_id not in self.stopped:
                        self.read_once(shard_id, lease)
            self.stop.wait(0.05)

    def read_once(self, shard_id: str, lease: Lease) -> None:
        reader = self.readers.get(shard_id)
        if reader is None:
            reader = self.readers[shard_id] = ShardReader(
                self.kinesis, self.stream, shard_id, lease.checkpoint.resume_position(), fetch_interval_s=0
            )
        read = reader.read(max_records=1000, until_caught_up=True)
        self.out.extend(read.records())
        if read.last_sequence_number:
            self.coordinator.checkpoint(shard_id, Checkpoint.sequence(read.last_sequence_number))
        if read.shard_ended:
            self.coordinator.shard_ended(shard_id, read.child_shards)
            self.stopped.add(shard_id)
            self.readers.pop(shard_id, None)


def test_lineage_split_and_merge_on_a_live_stream(kinesis, dynamodb, stream_name, table_name) -> None:
    make_stream(kinesis, stream_name, 2)
    timing = LeaseTiming(failover_s=FAILOVER, renew_interval_s=0.5, sync_interval_s=600)  # children come from SHARD_END
    coordinators, consumers, tables = [], [], []
    records: list = []
    violations: list[str] = []
    for name in ("a", "b"):
        table = CountingTable(dynamodb, table_name, "app", stream_name)
        table.created = []
        table.ensure_table()
        coordinator = LeaseCoordinator(table, name, timing=timing, shard_sync=ShardSync(kinesis, table))
        consumers.append(MiniConsumer(coordinator, kinesis, stream_name, records, violations))
        coordinators.append(coordinator)
        tables.append(table)
    try:
        for coordinator in coordinators:
            coordinator.start()
        wait_for(lambda: all(len(c.held()) == 1 for c in coordinators), 20, "one shard per worker")
        for consumer in consumers:
            consumer.thread.start()
        producer = KeyedProducer(kinesis, stream_name, keys=30)
        producer.put_rounds(2)
        lo, hi = 0, 2**127 - 1  # shard 0's range
        kinesis.split_shard(stream_name, "shardId-000000000000", (lo + hi + 1) // 2)
        kinesis.wait_active(stream_name)
        producer.put_rounds(2)
        kinesis.merge_shards(stream_name, "shardId-000000000003", "shardId-000000000001")
        kinesis.wait_active(stream_name)
        producer.put_rounds(2)
        view = lambda: {l.shard_id: l for l in tables[0].list_leases()}
        wait_for(lambda: all(view().get(s) and view()[s].is_shard_end for s in
                             ("shardId-000000000000", "shardId-000000000001", "shardId-000000000003")),
                 30, "the three parents to reach SHARD_END")
        wait_for(lambda: {s for c in coordinators for s in c.held()} == {"shardId-000000000002", "shardId-000000000004"},
                 10, "both open shards to be owned")
        wait_for(lambda: len(records) >= producer.acknowledged, 20, "every record to be read")
    finally:
        for consumer in consumers:
            consumer.stop.set()
        for consumer in consumers:
            if consumer.thread.is_alive():
                consumer.thread.join(10)
        for coordinator in coordinators:
            coordinator.stop()
    assert violations == []
    created = [s for t in tables for s in t.created]
    assert created.count("shardId-000000000004") == 1  # the merge child, whichever parent ended first
    assert sorted(created) == [f"shardId-00000000000{i}" for i in range(5)]
    merged = tables[0].get_lease("shardId-000000000004")
    assert merged.parent_shard_ids == ("shardId-000000000001", "shardId-000000000003")
    report = check_order(records, producer.expected())
    assert report.ok, report.summary()
    assert not ShardSync(kinesis, tables[0]).run().created  # the table already matches the lineage


def test_shard_sync_follows_update_shard_count_and_repairs_a_stale_table(kinesis, dynamodb, stream_name, table_name) -> None:
    make_stream(kinesis, stream_name, 2)
    table = LeaseTable(dynamodb, table_name, "app", stream_name)
    table.ensure_table()
    sync = ShardSync(kinesis, table, Position.latest())
    assert sync.run().created == ("shardId-000000000000", "shardId-000000000001")
    # Nobody runs while the stream is resized twice.
    kinesis.update_shard_count(stream_name, 4)
    kinesis.wait_active(stream_name)
    kinesis.update_shard_count(stream_name, 3)
    kinesis.wait_active(stream_name)
    discovered = {s["ShardId"] for s in kinesis.list_shards(stream_name)}
    report = sync.run()
    assert set(report.created) == discovered - {"shardId-000000000000", "shardId-000000000001"}
    leases = table.list_leases()
    assert {l.shard_id for l in leases} == discovered
    new = [l for l in leases if l.shard_id in report.created]
    assert all(l.checkpoint == Checkpoint.trim_horizon() and l.parent_shard_ids for l in new)
    # Only the original shards may be read first; every new generation waits for its parents.
    first = plan_assignment("w", leases, ["w"]).take
    assert {l.shard_id for l in first} == {"shardId-000000000000", "shardId-000000000001"}
    assert not sync.run().changed


def test_shard_end_is_one_fenced_transaction_on_dynamodb_local(dynamodb, table_name) -> None:
    """DynamoDB Local's transactions: cancellation reasons per action, the old item on a failed condition."""
    table = LeaseTable(dynamodb, table_name, "app", "orders")
    table.ensure_table()
    parent = "shardId-000000000000"
    low = Lease.for_child(ChildShard("shardId-000000000001", (parent,), 0, 2**127 - 1))
    high = Lease.for_child(ChildShard("shardId-000000000002", (parent,), 2**127, 2**128 - 1))
    table.create_lease(Lease(parent, Checkpoint.trim_horizon(), HashRange(0, 2**128 - 1)))
    zombie = table.take_lease(table.get_lease(parent), "zombie")
    held = table.steal_lease(zombie, "w2")
    with pytest.raises(LeaseLostError):  # fenced: the zombie creates no child
        table.mark_shard_end(zombie, [low, high])
    assert table.get_lease(low.shard_id) is None and table.get_lease(high.shard_id) is None
    assert table.create_lease(high)  # one child exists already: the transaction goes through without it
    result = table.mark_shard_end(held, [low, high])
    assert result.created_children == (low.shard_id,) and result.existing_children == (high.shard_id,)
    assert table.get_lease(parent) == result.lease
    again = table.mark_shard_end(held, [low, high])  # our own landed write, retried
    assert again.lease == result.lease


def test_heartbeats_and_ttl_on_dynamodb_local(dynamodb, table_name) -> None:
    table = LeaseTable(dynamodb, table_name, "app", "orders")
    table.ensure_table()
    raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb.endpoint)
    ttl = raw.describe_time_to_live(TableName=table_name)
    assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"
    table.now_ms = lambda: 0  # a wall clock at 1970
    me = table.register_worker("w1")
    status, me = table.heartbeat(me)
    status, me = table.heartbeat(me)
    assert status is HeartbeatStatus.RENEWED and me.heartbeat == 2 == table.scan().workers["w1"].heartbeat
    item = raw.get_item(
        TableName=table_name, Key={"pk": {"S": table.partition}, "sk": {"S": "worker#w1"}}, ConsistentRead=True)
    assert int(item["Item"]["ttl"]["N"]) > time.time() + 23 * 3600


def test_an_upgrade_keeps_the_earlier_layouts_checkpoints_on_dynamodb_local(dynamodb, table_name) -> None:
    # issue #12: leases may now be spread over several partition keys (leases/layout.py); a table written by
    # the earlier version (every lease under lease#app#orders, no layout item) must keep its checkpoints
    from kinesis_src.leases.schema.lease_items import LeaseCodec

    LeaseTable(dynamodb, table_name, "app", "orders").ensure_table()
    raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb.endpoint)
    codec = LeaseCodec(table_name)
    for i in range(6):
        old = Lease(f"shardId-{i:012d}", Checkpoint.sequence(str(500 + i)), HashRange(i, i), counter=4, owner="old")
        raw.put_item(TableName=table_name, Item=codec.lease_item("lease#app#orders", old))
    clock = [0.0]
    table = LeaseTable(dynamodb, table_name, "app", "orders", lease_partitions=8)
    worker = LeaseCoordinator(table, "new", timing=LeaseTiming(failover_s=3.0, renew_interval_s=1.0),
                              clock=lambda: clock[0])
    worker.register()
    worker.run_once()  # "old" has no heartbeat: its leases are free to take
    held = worker.held()
    assert {s: l.checkpoint for s, l in held.items()} == {
        f"shardId-{i:012d}": Checkpoint.sequence(str(500 + i)) for i in range(6)}
    worker.checkpoint("shardId-000000000000", Checkpoint.sequence("900"))
    pks = {item["pk"]["S"] for item in raw.scan(TableName=table_name, ConsistentRead=True)["Items"]}
    assert pks == {"lease#app#orders", "layout#app#orders"}  # same key as before, the layout recorded apart
    assert LeaseTable(dynamodb, table_name, "app", "orders").get_lease("shardId-000000000000").checkpoint == \
        Checkpoint.sequence("900")
    worker.stop()


def test_leases_spread_over_partition_keys_on_dynamodb_local(dynamodb, table_name) -> None:
    table = LeaseTable(dynamodb, table_name, "app", "orders", lease_partitions=4)
    table.ensure_table()
    for i in range(30):
        assert table.create_lease(Lease(f"shardId-{i:012d}", Checkpoint.trim_horizon(), HashRange(i, i)))
    table.register_worker("w1")
    raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb.endpoint)
    pks = {item["pk"]["S"] for item in raw.scan(TableName=table_name, ConsistentRead=True)["Items"]}
    assert pks == {"lease#app#orders", "layout#app#orders"} | {f"lease#app#orders/{k}" for k in range(4)}
    reader = LeaseTable(dynamodb, table_name, "app", "orders")
    view = reader.scan()
    assert len(view.leases) == 30 and list(view.workers) == ["w1"] and reader.known_partitions() == 4
