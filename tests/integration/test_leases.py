"""The lease table on DynamoDB Local with real worker processes: race, failover, fencing, corrupt items.

Worker processes are tests/integration/lease_worker.py (JSON lines out,
commands in), started in their own session and killed by PID in finally.
Timing: failover 3 s, renewal 1 s. Nothing sleeps to synchronize: every
wait polls a condition with a deadline. Lineage, shard sync and the table's
layouts, with in-process coordinators, are tests/integration/test_lease_lineage.py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from lease_fixtures import (  # noqa: F401  (fixtures)
    FAILOVER,
    RENEW,
    dynamodb_fixture,
    make_stream,
    table_name_fixture,
)
from waiting import wait_for  # tests/waiting.py
from worker_process import WorkerProcess, spawned  # tests/worker_process.py

from kinesis_src.errors import LeaseTableNotFoundError
from kinesis_src.leases.model import Checkpoint
from kinesis_src.leases.progress_store import ProgressStore
from kinesis_src.leases.table import LeaseTable

pytestmark = pytest.mark.integration

WORKER = Path(__file__).resolve().parent / "lease_worker.py"
# Scans are reads only; scanning 4x per renewal keeps "owned within failover + one renewal" well clear
# of the bound on a loaded 2-core CI machine (failover + 2 scans + the takes themselves).
SCAN = 0.25


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
