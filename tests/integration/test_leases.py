"""The lease table on DynamoDB Local with real worker processes, and lineage on kinesis-mock.

Worker processes are tests/integration/lease_worker.py (JSON lines out,
commands in), started in their own session and killed by PID in finally.
Timing: failover 3 s, renewal 1 s. Nothing sleeps to synchronize: every
wait polls a condition with a deadline.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

import boto3
import pytest
from waiting import wait_for  # tests/waiting.py
from worker_process import WorkerProcess, spawned  # tests/worker_process.py

from kinesis_src import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import LeaseLostError, LeaseTableNotFoundError
from kinesis_src.leases.assignment import plan_assignment
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease, ShardEndResult
from kinesis_src.leases.progress import ProgressStore
from kinesis_src.leases.shard_sync import ShardSync
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.retry import RetryPolicy
from kinesis_src.workload import KeyedProducer, check_order
from lineage import HashRange

pytestmark = pytest.mark.integration

WORKER = Path(__file__).resolve().parent / "lease_worker.py"
FAILOVER, RENEW = 3.0, 1.0
# Scans are reads only; scanning 4x per renewal keeps "owned within failover + one renewal" well clear
# of the bound on a loaded 2-core CI machine (failover + 2 scans + the takes themselves).
SCAN = 0.25
RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0)
_ids = itertools.count()



@pytest.fixture
def dynamodb(emulator_env: dict[str, str]) -> DynamoDBClient:
    return DynamoDBClient(AwsSettings.from_env(retry=RETRY))


@pytest.fixture
def table_name() -> str:
    return f"leases-{uuid.uuid4().hex[:8]}-{next(_ids)}"


def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)


class WorkerProc(WorkerProcess):
    """One lease_worker.py process, which also takes JSON commands on stdin and answers them as events."""

    def __init__(self, worker_id: str, table: str, stream: str, env: dict[str, str], log_dir: Path, *extra: str) -> None:
        argv = [sys.executable, str(WORKER), "--worker-id", worker_id, "--table", table, "--application", "app",
                "--stream", stream, "--failover", str(FAILOVER), "--renew", str(RENEW), "--scan", str(SCAN), *extra]
        super().__init__(worker_id, argv, {**os.environ, **env, "LEASE_WORKER_LOG": "INFO"}, log_dir,
                         stdin=subprocess.PIPE)
        self._ids = itertools.count(1)

    def started_at(self) -> float | None:
        started = self.of("started")
        return started[0]["arrived"] if started else None

    def held(self) -> set[str]:
        cycles = self.of("cycle")
        return set(cycles[-1]["held"]) if cycles else set()

    def send(self, **command: Any) -> int:
        command_id = next(self._ids)
        self.proc.stdin.write(json.dumps({"id": command_id, **command}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return command_id

    def result(self, command_id: int, timeout_s: float = 20.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.of("result") if e.get("id") == command_id), None)

        return wait_for(found, timeout_s, f"{self.worker_id} to answer command {command_id}")

    def kill(self) -> None:
        super().kill()
        self.proc.stdin.close()  # type: ignore[union-attr]


@pytest.fixture
def spawn(emulator_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest):
    def make(worker_id: str, table: str, stream: str, *extra: str) -> WorkerProc:
        return WorkerProc(worker_id, table, stream, emulator_env, tmp_path, *extra)

    with spawned(request, make) as start:
        yield start


def owners(table: LeaseTable) -> dict[str, str | None]:
    try:
        return {lease.shard_id: lease.owner for lease in table.list_leases()}
    except LeaseTableNotFoundError:  # the workers have not created it yet
        return {}


def balanced(table: LeaseTable, workers: list[str], shards: int) -> dict[str, int] | None:
    view = owners(table)
    if len(view) != shards or any(owner not in workers for owner in view.values()):
        return None
    counts = {w: sum(1 for o in view.values() if o == w) for w in workers}
    fair = shards / len(workers)
    return counts if all(fair - 1 <= c <= fair + 1 for c in counts.values()) else None


def key_for(shard: dict[str, Any], salt: str = "") -> str:
    """A partition key whose MD5 lands in this shard's hash range."""
    lo, hi = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    for i in itertools.count():
        key = f"k{salt}{i}"
        if lo <= int(hashlib.md5(key.encode()).hexdigest(), 16) <= hi:
            return key
    raise AssertionError("unreachable")


# -- race, failover, fencing --------------------------------------------------------------


def test_race_four_workers_share_16_shards_within_one_failover(kinesis, dynamodb, stream_name, table_name, spawn) -> None:
    make_stream(kinesis, stream_name, 16)
    names = ["w1", "w2", "w3", "w4"]
    workers = [spawn(name, table_name, stream_name) for name in names]
    wait_for(lambda: all(w.started_at() for w in workers), 60, "all four workers to start")
    all_started = max(w.started_at() for w in workers)  # type: ignore[type-var]
    table = LeaseTable(dynamodb, table_name, "app", stream_name)
    counts = wait_for(lambda: balanced(table, names, 16), FAILOVER - (time.monotonic() - all_started),
                      "16 leases shared 4 +/- 1 among four workers")
    converged_s = time.monotonic() - all_started
    print(f"race: converged {converged_s:.2f}s after the last worker started; counts {counts}")

    # Every worker's own view agrees with the table: each shard held by exactly one worker.
    def views_agree() -> bool:
        view = owners(table)
        held = {w.worker_id: w.held() for w in workers}
        return all(held[name] == {s for s, o in view.items() if o == name} for name in names)

    wait_for(views_agree, 2 * RENEW + 1, "workers' held sets to match the table")
    held_sets = [w.held() for w in workers]
    assert sum(len(h) for h in held_sets) == 16 and len(set().union(*held_sets)) == 16


def test_failover_after_sigkill_resumes_at_the_dead_workers_checkpoints(kinesis, dynamodb, stream_name, table_name, spawn) -> None:
    make_stream(kinesis, stream_name, 12)
    names = ["w1", "w2", "w3"]
    workers = {name: spawn(name, table_name, stream_name, "--read-on-acquire") for name in names}
    table = LeaseTable(dynamodb, table_name, "app", stream_name)
    wait_for(lambda: balanced(table, names, 12), 60, "12 leases shared among three workers")
    victim = workers["w1"]
    wait_for(lambda: victim.held() == {s for s, o in owners(table).items() if o == "w1"}, 10, "w1 to see its leases")
    shards = {s["ShardId"]: s for s in kinesis.list_shards(stream_name)}
    written: dict[str, tuple[str, str]] = {}
    for shard_id in sorted(victim.held()):
        key = key_for(shards[shard_id])
        results = kinesis.put_records(stream_name, [(key, b"first"), (key, b"second")])
        assert {r["ShardId"] for r in results} == {shard_id}
        written[shard_id] = (results[0]["SequenceNumber"], results[1]["SequenceNumber"])
        answer = victim.result(victim.send(cmd="checkpoint", shard=shard_id, sequence=written[shard_id][0]))
        assert answer["ok"], answer

    killed_at = time.monotonic()
    victim.kill()

    def taken_over() -> bool:
        view = owners(table)
        return all(view[s] in ("w2", "w3") for s in written)

    wait_for(taken_over, FAILOVER + RENEW + 5, "survivors to own w1's shards")
    failover_s = time.monotonic() - killed_at
    print(f"failover: w1's {len(written)} shards owned by survivors {failover_s:.2f}s after SIGKILL")
    assert failover_s <= FAILOVER + RENEW, f"failover took {failover_s:.2f}s > {FAILOVER + RENEW}s"

    def after_kill(kind: str, shard_id: str) -> list[dict[str, Any]]:
        return [e for w in ("w2", "w3") for e in workers[w].of(kind) if e["arrived"] > killed_at and e["shard"] == shard_id]

    for shard_id, (first, second) in written.items():
        read = wait_for(lambda s=shard_id: after_kill("read", s), 10, f"a survivor to read {shard_id}")[-1]
        assert after_kill("acquired", shard_id)[-1]["checkpoint"] == first  # the dead worker's checkpoint
        assert read["sequence_numbers"] == [second]  # resumed right after it


def test_fencing_a_paused_worker_cannot_write_after_losing_its_lease(kinesis, dynamodb, stream_name, table_name, spawn) -> None:
    make_stream(kinesis, stream_name, 1)
    shard = "shardId-000000000000"
    table = LeaseTable(dynamodb, table_name, "app", stream_name)
    w1 = spawn("w1", table_name, stream_name)
    wait_for(lambda: "w1" in owners(table).values() and w1.held() == {shard}, 60, "w1 to hold the shard")
    w2 = spawn("w2", table_name, stream_name)
    wait_for(w2.started_at, 60, "w2 to start")
    seq = kinesis.put_record(stream_name, "k", b"x")["SequenceNumber"]
    assert w1.result(w1.send(cmd="checkpoint", shard=shard, sequence=seq))["ok"]

    os.kill(w1.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: owners(table)[shard] == "w2", FAILOVER + RENEW + 5, "w2 to take the paused worker's lease")
        raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb.endpoint)
        key = table._lease_key(shard)
        taken = raw.get_item(TableName=table_name, Key=key, ConsistentRead=True)["Item"]
        # Writes the paused worker had "in flight", queued before it resumes.
        stale_checkpoint = w1.send(cmd="checkpoint_stale", shard=shard, sequence="99999")
        stale_progress = w1.send(cmd="progress_stale", shard=shard, run="run-1", batch=1, sequence="99999")
        via_coordinator = w1.send(cmd="checkpoint", shard=shard, sequence="99999")
    finally:
        os.kill(w1.proc.pid, signal.SIGCONT)
    for command_id in (stale_checkpoint, stale_progress, via_coordinator):
        answer = w1.result(command_id)
        assert not answer["ok"] and answer["error"] == "LeaseLostError", answer
    assert "owner w2" in w1.result(stale_checkpoint)["message"]
    # w1 learns it was declared dead, registers again, and leaves the single lease with w2.
    wait_for(lambda: any(e.get("heartbeat") == "declared_dead" for e in w1.of("cycle")), 10, "w1 to learn it was declared dead")
    cycles_after = len(w1.of("cycle"))
    wait_for(lambda: len(w1.of("cycle")) >= cycles_after + 2, 10, "two more w1 cycles")
    assert w1.held() == set() and w2.held() == {shard}
    assert raw.get_item(TableName=table_name, Key=key, ConsistentRead=True)["Item"] == taken  # untouched
    assert ProgressStore.of(table).get("run-1", 1, shard) is None
    assert table.get_lease(shard).checkpoint == Checkpoint.sequence(seq)


def test_a_corrupt_item_stops_the_worker_with_the_item_and_attribute_named(kinesis, dynamodb, stream_name, table_name, spawn) -> None:
    make_stream(kinesis, stream_name, 2)
    table = LeaseTable(dynamodb, table_name, "app", stream_name)
    w1 = spawn("w1", table_name, stream_name, "--lease-refresh", "2")
    wait_for(lambda: len(w1.held()) == 2, 60, "w1 to hold both shards")
    raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb.endpoint)
    raw.update_item(TableName=table_name, Key=table._lease_key("shardId-000000000001"),
                    UpdateExpression="SET checkpoint = :n", ExpressionAttributeValues={":n": {"N": "12"}})
    # a hand edit announces nothing (no heartbeat's leaseChanges moved): seen at the periodic re-read
    failed = wait_for(lambda: w1.of("failed"), 12, "w1 to fail")[0]
    assert failed["error"] == "CorruptLeaseError"
    assert repr(table_name) in failed["message"] and "sk='shard#shardId-000000000001'" in failed["message"]
    assert "attribute 'checkpoint' has type N" in failed["message"]
    assert w1.proc.wait(timeout=10) == 3


# -- lineage and shard sync (in-process coordinators on kinesis-mock) --------------------------


class CountingTable(LeaseTable):
    """Records every successful lease creation, to prove a merge child is created once."""

    created: list[str]

    def create_lease(self, lease: Lease) -> bool:
        ok = super().create_lease(lease)
        if ok:
            self.created.append(lease.shard_id)
        return ok

    def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        result = super().mark_shard_end(lease, children)
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
        self.before_release(lease)

    def before_release(self, lease: Lease) -> None:
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
    from kinesis_src.leases.serializer import LeaseCodec

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
