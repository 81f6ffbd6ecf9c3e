"""The consumer (:class:`kinesis_src.Consumer`) on kinesis-mock + DynamoDB Local, with real worker processes.

Worker processes are tests/integration/consumer_worker.py: one async
Consumer each, every batch and checkpoint reported as a JSON line with the
worker's ``time.monotonic()`` (one clock for every process on Linux, so
events of different workers can be ordered). They run in their own session
and are killed by PID in a ``finally`` (the ``spawn`` fixture). Timing:
failover 3 s, renewal 1 s, scan 0.25 s. Nothing sleeps to synchronize:
every wait polls a condition with a deadline.

What "correct" means here, exactly (the assertions of the main test):

* at least once: every record Kinesis acknowledged is delivered;
* a record is delivered again only after a delivery that was never
  acknowledged: once a worker's checkpoint covering it is confirmed, no
  worker delivers it again (at most one acknowledged delivery per record);
  the unacknowledged deliveries are the killed worker's tail after its last
  confirmed checkpoint, or a batch whose checkpoint raised LeaseLostError;
* per holding (one worker's consecutive batches of one shard): batches
  numbered 1, 2, 3..., sequence numbers and every key's counters strictly
  increasing;
* parent first: with each record counted at its first delivery (across all
  workers, in time order), every record of a parent shard is delivered
  before any record of its children, so every key's counters increase
  across splits and merges;
* nothing left unread: every closed shard's lease is SHARD_END (or was
  deleted as drained), every open shard's lease is checkpointed at its last
  record.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import waiting  # tests/waiting.py
from worker_process import WorkerProcess, spawned  # tests/worker_process.py

from kinesis_src import BlockingConsumer, Consumer, LeaseTiming, Position
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import (
    ConfigurationError,
    LeaseLostError,
    LeaseTableNotFoundError,
    StreamNotFoundError,
)
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy
from kinesis_src.testing import KeyedProducer, Resharder, decode

pytestmark = pytest.mark.integration

WORKER = Path(__file__).resolve().parent / "consumer_worker.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
APP = "consumer-tests"  # one lease table (kinesis-src-consumer-tests); every test has its own stream
FAILOVER, RENEW, SCAN = 3.0, 1.0, 0.25
TIMING = LeaseTiming(failover_s=FAILOVER, renew_interval_s=RENEW, scan_interval_s=SCAN)
RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0)



def wait_for(condition: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition", poll_s: float = 0.05) -> Any:
    """tests/waiting.py's, polling less often: many of these conditions read the lease table."""
    return waiting.wait_for(condition, timeout_s, what, poll_s)


def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)


def split_then_merge_mid_read(kinesis: KinesisClient, stream: str, producer: KeyedProducer, rounds: int = 2) -> None:
    """Split shard 0 at its middle (-> 2 lower, 3 upper), then merge 3 with 1 (-> 4), ``rounds`` put after each.

    The reshards of :func:`kinesis_src.testing.split_then_merge`, on a
    two-shard stream that workers already read (that one creates the stream).
    """
    resharder = Resharder(kinesis)
    resharder.split(stream, "shardId-000000000000")
    producer.put_rounds(rounds)
    resharder.merge(stream, "shardId-000000000003", "shardId-000000000001")
    producer.put_rounds(rounds)


@pytest.fixture
def dynamodb(emulator_env: dict[str, str]) -> DynamoDBClient:
    return DynamoDBClient(AwsSettings.from_env(retry=RETRY))


@pytest.fixture
def table(dynamodb: DynamoDBClient, stream_name: str) -> LeaseTable:
    lease_table = LeaseTable(dynamodb, default_table_name(APP), APP, stream_name)
    lease_table.ensure_table(create=True)
    return lease_table


# -- worker processes ---------------------------------------------------------------------


class WorkerProc(WorkerProcess):
    """One consumer_worker.py process; a reader thread collects its events."""

    def __init__(self, worker_id: str, stream: str, env: dict[str, str], log_dir: Path, *extra: str) -> None:
        argv = [sys.executable, str(WORKER), "--stream", stream, "--application", APP, "--worker-id", worker_id,
                "--failover", str(FAILOVER), "--renew", str(RENEW), "--scan", str(SCAN), *extra]
        super().__init__(worker_id, argv, env, log_dir)

    def held(self) -> set[str]:
        held = self.of("held")
        return set(held[-1]["shards"]) if held else set()


@pytest.fixture
def spawn(emulator_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest):
    env = {**os.environ, **emulator_env, "PYTHONPATH": str(REPO_ROOT), "CONSUMER_WORKER_LOG": "INFO"}
    with spawned(request, lambda worker_id, stream, *extra: WorkerProc(worker_id, stream, env, tmp_path, *extra)) as start:
        yield start


# -- what the workers reported ----------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One batch as one worker received it; records are (key, counter, sequence number)."""

    worker: str
    shard: str
    holding: int
    index: int
    t: float
    records: tuple[tuple[str, int, int], ...]


def deliveries(workers: Iterable[WorkerProc]) -> list[Delivery]:
    out = [
        Delivery(w.worker_id, e["shard"], e["holding"], e["index"], e["t"],
                 tuple((k, n, int(seq)) for k, n, seq in e["records"]))
        for w in workers for e in w.of("batch")
    ]
    return sorted(out, key=lambda d: (d.t, d.worker, d.index))


def confirmed(workers: Iterable[WorkerProc]) -> dict[tuple[str, str, int], int]:
    """(worker, shard, holding) -> highest sequence number whose checkpoint the worker saw succeed.

    The empty batch that ends a shard has no sequence number: its checkpoint covers everything the
    holding delivered before it."""
    out: dict[tuple[str, str, int], int] = {}
    for w in workers:
        with w._lock:
            events = list(w.events)
        delivered: dict[tuple[str, int], int] = {}
        for e in events:
            if e["event"] == "batch":
                seqs = [int(seq) for _, _, seq in e["records"]]
                delivered[(e["shard"], e["holding"])] = max([delivered.get((e["shard"], e["holding"]), 0), *seqs])
            elif e["event"] == "checkpointed":
                key = (w.worker_id, e["shard"], e["holding"])
                seq = delivered.get(key[1:], 0) if e["sequence"] is None else int(e["sequence"])
                out[key] = max(out.get(key, 0), seq)
    return out


def unacknowledged_tails(worker: WorkerProc) -> dict[tuple[str, int], list[int]]:
    """(shard, holding) -> indexes of the batches after the last confirmed checkpoint, for holdings whose
    last batch was deliberately not checkpointed: no checkpoint covering those batches was ever attempted."""
    with worker._lock:
        events = list(worker.events)
    batches: dict[tuple[str, int], list[int]] = defaultdict(list)
    last_checkpoint: dict[tuple[str, int], int] = {}
    skipped: set[tuple[str, int, int]] = set()
    for e in events:
        if e["event"] not in ("batch", "checkpointed", "skipped_checkpoint"):
            continue
        key = (e["shard"], e["holding"])
        if e["event"] == "batch":
            batches[key].append(e["index"])
        elif e["event"] == "checkpointed":
            last_checkpoint[key] = max(last_checkpoint.get(key, 0), e["index"])
        else:
            skipped.add((*key, e["index"]))
    return {
        key: [i for i in indexes if i > last_checkpoint.get(key, 0)]
        for key, indexes in batches.items() if (*key, indexes[-1]) in skipped
    }


def seen_keys(delivered: Iterable[Delivery]) -> set[tuple[str, int]]:
    return {(k, n) for d in delivered for k, n, _ in d.records}


def last_sequence_by_shard(delivered: Iterable[Delivery]) -> dict[str, int]:
    last: dict[str, int] = {}
    for d in delivered:
        for _, _, seq in d.records:
            last[d.shard] = max(last.get(d.shard, 0), seq)
    return last


def leases_by_shard(table: LeaseTable) -> dict[str, Lease]:
    try:
        return {lease.shard_id: lease for lease in table.list_leases()}
    except LeaseTableNotFoundError:
        return {}


def unread_shards(kinesis: KinesisClient, stream: str, table: LeaseTable, delivered: list[Delivery]) -> list[str]:
    """Shards not finished: a closed shard whose lease is not SHARD_END (a deleted lease counts as
    drained), an open shard without a lease or not checkpointed at its last delivered record."""
    last = last_sequence_by_shard(delivered)
    leases = leases_by_shard(table)
    problems = []
    for shard in kinesis.list_shards(stream):
        shard_id = shard["ShardId"]
        closed = "EndingSequenceNumber" in shard["SequenceNumberRange"]
        lease = leases.get(shard_id)
        if lease is None:
            if not closed:
                problems.append(f"{shard_id}: open shard without a lease")
            continue
        if lease.is_shard_end:
            continue
        if closed:
            problems.append(f"{shard_id}: closed, lease at {lease.checkpoint}, not SHARD_END")
        elif shard_id in last:
            if lease.checkpoint.sequence_number is None or int(lease.checkpoint.sequence_number) != last[shard_id]:
                problems.append(f"{shard_id}: open, lease at {lease.checkpoint}, last record {last[shard_id]}")
        elif lease.checkpoint.started:
            problems.append(f"{shard_id}: open with no record delivered, lease at {lease.checkpoint}")
    return problems


class PacedProducer:
    """KeyedProducer rounds from a background thread, one round every ``interval_s`` at most."""

    def __init__(self, producer: KeyedProducer, interval_s: float, max_rounds: int) -> None:
        self.producer = producer
        self.interval_s = interval_s
        self.max_rounds = max_rounds
        self.rounds = 0
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while self.rounds < self.max_rounds and not self._stop.is_set():
                began = time.monotonic()
                self.producer.put_round()
                self.rounds += 1
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))
        except Exception as exc:  # noqa: BLE001 - re-raised by stop()
            self.error = exc

    def wait_rounds(self, n: int, timeout_s: float = 30.0) -> None:
        target = self.rounds + n
        wait_for(lambda: self.rounds >= target or not self._thread.is_alive(), timeout_s, f"{n} producer rounds")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "producer did not stop"
        if self.error is not None:
            raise self.error


def lineage(kinesis: KinesisClient, stream: str) -> dict[str, tuple[str, ...]]:
    """shard -> its parents (split: one, merge: two)."""
    out = {}
    for shard in kinesis.list_shards(stream):
        parents = tuple(p for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId")) if p)
        out[shard["ShardId"]] = parents
    return out


# -- a. three workers, live reshard, SIGKILL, a replacement ---------------------------------------


def test_three_workers_through_split_merge_sigkill_and_replacement(kinesis, table, stream_name, spawn) -> None:
    """The main scenario: 12 shards, 3 workers, a split and a merge under load, one worker SIGKILLed
    (it checkpoints only every 2nd batch, so it dies with an unacknowledged tail), a fourth joins."""
    began = time.monotonic()
    make_stream(kinesis, stream_name, 12)
    workers = {"w1": spawn("w1", stream_name, "--checkpoint-every", "2")}
    workers.update({name: spawn(name, stream_name) for name in ("w2", "w3")})
    wait_for(lambda: all(w.started() for w in workers.values()), 60, "three workers to start")

    def spread() -> bool:
        return Counter(lease.owner for lease in leases_by_shard(table).values()) == {"w1": 4, "w2": 4, "w3": 4}

    wait_for(spread, 20, "12 leases spread over three workers")

    producer = KeyedProducer(kinesis, stream_name, keys=64)
    paced = PacedProducer(producer, interval_s=0.2, max_rounds=36).start()  # at most 2,304 records
    production_began = time.monotonic()
    try:
        paced.wait_rounds(5)
        shards = {s["ShardId"]: s for s in kinesis.list_shards(stream_name)}
        lo = int(shards["shardId-000000000000"]["HashKeyRange"]["StartingHashKey"])
        hi = int(shards["shardId-000000000000"]["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(stream_name, "shardId-000000000000", (lo + hi + 1) // 2)  # -> 12 (lower), 13 (upper)
        kinesis.wait_active(stream_name)
        paced.wait_rounds(5)
        victim = workers["w1"]

        def victim_ready() -> bool:  # it checkpointed, and dies with batches it never acknowledged
            held = victim.held()
            tails = [key for key in unacknowledged_tails(victim) if key[0] in held]
            return len(victim.of("checkpointed")) >= 2 and len(tails) >= 2

        wait_for(victim_ready, 20, "w1 to checkpoint, and to hold two shards with an unacknowledged last batch",
                 poll_s=0.01)
        killed_at = victim.sigkill()
        assert victim.wait_exit(10) == -signal.SIGKILL
        workers["w4"] = spawn("w4", stream_name)
        paced.wait_rounds(5)
        kinesis.merge_shards(stream_name, "shardId-000000000013", "shardId-000000000001")  # -> 14
        kinesis.wait_active(stream_name)
        paced.wait_rounds(5)
    finally:
        paced.stop()
    produced = producer.expected()
    produced_s = time.monotonic() - production_began
    survivors = [workers[name] for name in ("w2", "w3", "w4")]

    def finished() -> bool:
        delivered = deliveries(workers.values())
        return produced <= seen_keys(delivered) and not unread_shards(kinesis, stream_name, table, delivered)

    try:
        wait_for(finished, 40, "every record delivered and every lease at SHARD_END or its last record", poll_s=0.2)
    except AssertionError:
        delivered = deliveries(workers.values())
        missing = len(produced - seen_keys(delivered))
        raise AssertionError(f"{missing} records missing; unread: {unread_shards(kinesis, stream_name, table, delivered)}")
    caught_up_s = time.monotonic() - began
    for worker in survivors:
        worker.sigterm()
    for worker in survivors:
        assert worker.wait_exit(30) == 0, f"{worker.worker_id} did not stop cleanly:\n{worker.stderr_tail()}"
        assert worker.of("stopped"), worker.worker_id

    delivered = deliveries(workers.values())
    acks = confirmed(workers.values())
    shard_parents = lineage(kinesis, stream_name)
    print(f"main scenario: {len(produced)} records produced in {produced_s:.1f}s ({paced.rounds} rounds); all "
          f"consumed {caught_up_s:.1f}s after the start; {len(delivered)} batches; total {time.monotonic() - began:.1f}s")

    # At least once, and nothing that was never produced.
    assert seen_keys(delivered) == produced

    # Per holding: batches 1, 2, 3...; sequence numbers and each key's counters strictly increasing.
    holdings: dict[tuple[str, str, int], list[Delivery]] = defaultdict(list)
    for d in delivered:
        holdings[(d.worker, d.shard, d.holding)].append(d)
    for (worker, shard, holding), batches in holdings.items():
        assert [d.index for d in batches] == list(range(1, len(batches) + 1)), (worker, shard, holding)
        seqs = [seq for d in batches for _, _, seq in d.records]
        assert seqs == sorted(set(seqs)), f"{worker} {shard} holding {holding}: sequence numbers not increasing"
        last_n: dict[str, int] = {}
        for d in batches:
            for key, n, _ in d.records:
                assert n > last_n.get(key, 0), f"{worker} {shard}: {key}:{n} after {key}:{last_n[key]}"
                last_n[key] = n

    # Redelivery: at most one acknowledged delivery per record, and every other delivery of it is
    # unacknowledged: the killed worker's tail after its last confirmed checkpoint, or a batch whose
    # checkpoint was rejected (a lease taken over from a live worker: allowed, reported).
    failed_batches = {(w.worker_id, e["shard"], e["holding"], e["index"]) for w in survivors for e in w.of("checkpoint_failed")}
    deliveries_of: dict[tuple[str, int], list[tuple[Delivery, bool]]] = defaultdict(list)
    for d in delivered:
        acked_to = acks.get((d.worker, d.shard, d.holding), 0)
        for _, _, seq in d.records:
            deliveries_of[(d.shard, seq)].append((d, seq <= acked_to))
    counts = Counter(len(v) for v in deliveries_of.values())
    assert max(counts) <= 2, f"records delivered more than twice: {counts}"
    duplicated = {r: v for r, v in deliveries_of.items() if len(v) > 1}
    for (shard, seq), ds in duplicated.items():
        acked = [d for d, ok in ds if ok]
        assert len(acked) <= 1, f"{shard}/{seq} acknowledged by {[d.worker for d in acked]}, delivered again"
        for d, ok in ds:
            if ok:
                continue
            assert d.worker == "w1" or (d.worker, d.shard, d.holding, d.index) in failed_batches, (
                f"{shard}/{seq}: delivered unacknowledged by survivor {d.worker} without a rejected checkpoint"
            )
    # The killed worker's confirmed checkpoints hold: nothing at or before them is delivered after the kill.
    w1_confirmed: dict[str, int] = {}
    for (worker, shard, _), seq in acks.items():
        if worker == "w1":
            w1_confirmed[shard] = max(w1_confirmed.get(shard, 0), seq)
    assert w1_confirmed, "w1 confirmed no checkpoint before it was killed"
    for d in delivered:
        if d.t > killed_at and d.shard in w1_confirmed:
            early = [seq for _, _, seq in d.records if seq <= w1_confirmed[d.shard]]
            assert not early, f"{d.worker} redelivered {d.shard} records {early[:3]}... checkpointed by w1 before the kill"
    # ...and the killed worker's unacknowledged tails (batches after its last confirmed checkpoint, no
    # checkpoint covering them attempted) are all delivered again, later.
    tails = unacknowledged_tails(workers["w1"])
    assert tails, "w1 died with no unacknowledged batch: the kill came too late to test redelivery"
    w1_batches = {(d.shard, d.holding, d.index): d for d in delivered if d.worker == "w1"}
    for (shard, holding), indexes in tails.items():
        for index in indexes:
            tail = w1_batches[(shard, holding, index)]
            for _, _, seq in tail.records:
                later = [d for d, _ in deliveries_of[(shard, seq)] if d.t > tail.t]
                assert later, f"{shard}/{seq}: delivered to w1 (batch {index}, never acknowledged), never again"
    from_w1 = sum(1 for ds in duplicated.values() if any(d.worker == "w1" and not ok for d, ok in ds))
    print(f"redelivered: {len(duplicated)} records ({from_w1} from w1's unacknowledged tail), "
          f"{len(failed_batches)} rejected survivor checkpoints; w1 confirmed {len(w1_confirmed)} shards")

    # Parent first: counting each record at its first delivery, all of a parent's records come
    # before any record of its children, and so every key's counters increase across the reshards.
    first_t: dict[tuple[str, int], float] = {}
    order: list[tuple[str, str, int]] = []  # (shard, key, counter) at first delivery, in time order
    for d in delivered:
        for key, n, seq in d.records:
            if (d.shard, seq) not in first_t:
                first_t[(d.shard, seq)] = d.t
                order.append((d.shard, key, n))
    span: dict[str, tuple[float, float]] = {}
    for (shard, _), t in first_t.items():
        lo_t, hi_t = span.get(shard, (t, t))
        span[shard] = (min(lo_t, t), max(hi_t, t))
    assert shard_parents["shardId-000000000012"] == ("shardId-000000000000",)
    assert set(shard_parents["shardId-000000000014"]) == {"shardId-000000000001", "shardId-000000000013"}
    assert {f"shardId-0000000000{i:02d}" for i in (0, 1, 12, 13, 14)} <= set(span)  # every reshard shard had records
    for child, parents in shard_parents.items():
        for parent in parents:
            if child in span and parent in span:
                assert span[parent][1] < span[child][0], f"{child} delivered before the end of its parent {parent}"
    latest: dict[str, tuple[int, str]] = {}
    for shard, key, n in order:
        assert n > latest.get(key, (0, ""))[0], f"{key}:{n} (in {shard}) after {key}:{latest[key][0]} (in {latest[key][1]})"
        latest[key] = (n, shard)

    # Nothing left unread; after the graceful stops nobody owns a lease.
    assert unread_shards(kinesis, stream_name, table, delivered) == []
    assert {lease.shard_id: lease.owner for lease in table.list_leases() if lease.owner} == {}
    for worker in survivors:
        print(f"{worker.worker_id}: {worker.of('stopped')[0]['summary']}")


# -- b. graceful stop ---------------------------------------------------------------------------


def test_sigterm_hands_leases_over_within_a_renewal_and_nothing_checkpointed_is_redelivered(kinesis, table, stream_name, spawn) -> None:
    make_stream(kinesis, stream_name, 6)
    a, b = spawn("a", stream_name), spawn("b", stream_name)
    wait_for(lambda: a.started() and b.started(), 60, "both workers to start")
    wait_for(lambda: Counter(l.owner for l in leases_by_shard(table).values()) == {"a": 3, "b": 3}, 20, "3 leases each")
    producer = KeyedProducer(kinesis, stream_name, keys=24)
    producer.put_rounds(5)

    def all_checkpointed() -> bool:
        delivered = deliveries([a, b])
        return producer.expected() <= seen_keys(delivered) and not unread_shards(kinesis, stream_name, table, delivered)

    wait_for(all_checkpointed, 30, "every record delivered and checkpointed", poll_s=0.1)
    a_shards = {s for s, l in leases_by_shard(table).items() if l.owner == "a"}
    assert a.held() == a_shards and len(a_shards) == 3

    paced = PacedProducer(producer, interval_s=0.1, max_rounds=60).start()  # records keep coming during the stop
    try:
        paced.wait_rounds(3)
        sigterm_at = a.sigterm()
        assert a.wait_exit(20) == 0, a.stderr_tail()
        paced.wait_rounds(3)
    finally:
        paced.stop()
    stopped = a.of("stopped")
    assert stopped, a.stderr_tail()
    metrics = stopped[0]["metrics"]
    # Every lease a ever took (it may have shed some at start) was handed over gracefully.
    assert metrics["leases_lost"] == 0 and metrics["leases_taken"] == metrics["leases_released"] >= 3, metrics

    def b_took_all() -> dict[str, float] | None:
        taken = {}
        for e in b.of("held"):
            if e["t"] < sigterm_at:  # b may have held them before (at start, before a took its share)
                continue
            for shard in a_shards & set(e["shards"]):
                taken.setdefault(shard, e["t"])
        return taken if set(taken) == a_shards else None

    taken = wait_for(b_took_all, 10, "b to hold a's three shards")
    # a releases each lease, then removes its heartbeat, then prints "stopped". b takes the free
    # leases at its first scan after that: within one scan, plus the takes themselves; the bound
    # allowed is one renewal interval plus one scan plus slack for a loaded machine.
    bound_s = RENEW + SCAN + 0.5
    handover_s = max(taken.values()) - stopped[0]["t"]
    print(f"graceful stop: a stopped {stopped[0]['t'] - sigterm_at:.2f}s after SIGTERM; b held its shards "
          f"{handover_s:.2f}s after a's 'stopped' (bound {bound_s:.2f}s), {max(taken.values()) - sigterm_at:.2f}s "
          "after SIGTERM")
    assert handover_s <= bound_s, f"hand-over took {handover_s:.2f}s > {bound_s:.2f}s"

    wait_for(all_checkpointed, 30, "b to deliver and checkpoint everything", poll_s=0.1)
    b.sigterm()
    assert b.wait_exit(20) == 0, b.stderr_tail()
    delivered = deliveries([a, b])
    assert seen_keys(delivered) == producer.expected()
    a_checkpointed = {}
    for (worker, shard, _), seq in confirmed([a]).items():
        a_checkpointed[shard] = max(a_checkpointed.get(shard, 0), seq)
    again = [(d.shard, seq) for d in delivered if d.worker == "b" for _, _, seq in d.records
             if seq <= a_checkpointed.get(d.shard, -1)]
    assert again == [], f"b delivered {len(again)} records a had checkpointed, e.g. {again[:3]}"
    # a checkpointed every batch it was given before stopping, so a graceful hand-off redelivers nothing.
    positions = Counter((d.shard, seq) for d in delivered for _, _, seq in d.records)
    assert [p for p, c in positions.items() if c > 1] == []
    assert {s: l.owner for s, l in leases_by_shard(table).items() if l.owner} == {}


# -- c. checkpoint after the lease was lost -------------------------------------------------------


def test_checkpoint_after_the_lease_was_taken_raises_lease_lost_and_writes_nothing(kinesis, table, stream_name, emulator_env) -> None:
    make_stream(kinesis, stream_name, 1)
    shard = "shardId-000000000000"
    producer = KeyedProducer(kinesis, stream_name, keys=5)
    producer.put_rounds(2)

    async def scenario() -> None:
        async with Consumer(stream_name, application_name=APP, worker_id="c1", lease_timing=TIMING,
                            idle_interval_s=0.1, handle_signals=False) as consumer:
            batch = await asyncio.wait_for(consumer.__anext__(), 20)
            assert len(batch) >= 1 and batch.shard_id == shard
            before = await asyncio.to_thread(table.get_lease, shard)
            assert before.owner == "c1" and before.checkpoint == Checkpoint.trim_horizon()
            # Another worker takes the lease (a live one: registered, so c1 does not take it straight back).
            thief = await asyncio.to_thread(table.register_worker, "thief")
            assert await asyncio.to_thread(table.take_lease, before, "thief") is not None
            with pytest.raises(LeaseLostError) as lost:
                await batch.checkpoint()
            assert shard in str(lost.value)
            after = await asyncio.to_thread(table.get_lease, shard)
            assert after.owner == "thief" and after.checkpoint == before.checkpoint  # nothing written
            assert after.counter == before.counter + 1
            # The lease comes back to c1 once the thief is gone: everything after the last checkpoint
            # (here: everything) is delivered again, and can be checkpointed.
            await asyncio.to_thread(table.deregister_worker, thief)
            again = await asyncio.wait_for(consumer.__anext__(), FAILOVER + 10)
            assert again.shard_id == shard and again.first_sequence_number == batch.first_sequence_number
            assert [r.data for r in again.records] == [r.data for r in batch.records]
            await again.checkpoint()
            assert consumer.metrics.leases_lost >= 1 and consumer.metrics.leases_taken >= 2
        final = await asyncio.to_thread(table.get_lease, shard)
        assert final.checkpoint == Checkpoint.sequence(batch.last_sequence_number) and final.owner is None

    asyncio.run(scenario())


# -- d. an unacknowledged batch goes to the next owner -------------------------------------------


def test_uncheckpointed_batches_are_redelivered_to_the_next_worker(kinesis, table, stream_name, spawn) -> None:
    make_stream(kinesis, stream_name, 2)
    unacked, acked = "shardId-000000000000", "shardId-000000000001"
    producer = KeyedProducer(kinesis, stream_name, keys=16)
    producer.put_rounds(3)
    first = spawn("u1", stream_name, "--no-checkpoint-shards", unacked)
    wait_for(lambda: seen_keys(deliveries([first])) >= producer.expected(), 60, "u1 to receive every record")
    first.sigterm()
    assert first.wait_exit(20) == 0, first.stderr_tail()
    leases = leases_by_shard(table)
    assert leases[unacked].owner is None and leases[unacked].checkpoint == Checkpoint.trim_horizon()
    assert leases[acked].owner is None and leases[acked].checkpoint.started
    given_first = [seq for d in deliveries([first]) if d.shard == unacked for _, _, seq in d.records]
    assert given_first and not first.of("checkpoint_failed")

    second = spawn("u2", stream_name)

    def second_done() -> bool:
        lease = leases_by_shard(table)[unacked]
        return lease.checkpoint.sequence_number is not None and int(lease.checkpoint.sequence_number) == max(given_first)

    wait_for(second_done, 30, "u2 to read and checkpoint the unacknowledged shard")
    second.sigterm()
    assert second.wait_exit(20) == 0, second.stderr_tail()
    given_second = deliveries([second])
    assert [seq for d in given_second if d.shard == unacked for _, _, seq in d.records] == given_first
    assert [d for d in given_second if d.shard == acked] == []  # checkpointed by u1: not delivered again


def test_a_latest_start_loses_nothing_when_the_first_owner_dies_before_its_first_checkpoint(
    kinesis, table, stream_name, spawn
) -> None:
    """initial_position="latest": the lease is created when the application first starts, and names that
    instant. Its first owner dies before any checkpoint; the next owner must deliver every record put
    after the lease was created (a lease still saying LATEST would make it skip them), and none put before."""
    make_stream(kinesis, stream_name, 1)
    shard = "shardId-000000000000"
    producer = KeyedProducer(kinesis, stream_name, keys=8)
    producer.put_rounds(1)  # before the application exists: "latest" excludes these
    early = producer.expected()
    first = spawn("l1", stream_name, "--initial-position", "latest", "--no-checkpoint-shards", shard)
    wait_for(lambda: first.started() and first.held() == {shard}, 60, "l1 to start with the lease")
    # A round at a time until l1 delivers one: then it is certainly reading (a LATEST iterator taken
    # after a put would skip it, so without this the old behaviour fails here, not at the hand-over).
    wait_for(lambda: producer.put_round() or deliveries([first]), 30, "l1 to deliver a first record", poll_s=0.5)
    reading = producer.expected()
    producer.put_rounds(2)
    late = producer.expected() - early
    wait_for(lambda: seen_keys(deliveries([first])) >= producer.expected() - reading, 30, "l1 to receive more records")
    assert leases_by_shard(table)[shard].checkpoint.sequence_number is None  # l1 never checkpointed
    first.sigkill()
    assert first.wait_exit(10) == -signal.SIGKILL

    second = spawn("l2", stream_name, "--initial-position", "latest")
    wait_for(lambda: seen_keys(deliveries([second])) >= late, FAILOVER + 30,
             "l2 to deliver the records l1 received but never acknowledged")
    assert seen_keys(deliveries([second])) == late  # and nothing from before the application started
    second.sigterm()
    assert second.wait_exit(20) == 0, second.stderr_tail()


def test_checkpointing_every_nth_batch_still_ends_a_closed_shard_and_reads_its_children(
    kinesis, table, stream_name, spawn
) -> None:
    """The worker checkpoints only every 1000th batch of a shard and, as documented, every batch whose
    ends_shard is True; small pages make many batches. After a split, the parent must still reach
    SHARD_END and its children be read: nothing else ever acknowledges the parent's last batch."""
    make_stream(kinesis, stream_name, 1)
    parent = "shardId-000000000000"
    producer = KeyedProducer(kinesis, stream_name, keys=8)
    producer.put_rounds(3)
    worker = spawn("n1", stream_name, "--checkpoint-every", "1000", "--max-records", "5")
    wait_for(lambda: seen_keys(deliveries([worker])) >= producer.expected(), 60, "n1 to read the parent")
    assert not worker.of("checkpointed")  # 5 batches so far, none the 1000th
    hash_range = kinesis.list_shards(stream_name)[0]["HashKeyRange"]
    lo, hi = int(hash_range["StartingHashKey"]), int(hash_range["EndingHashKey"])
    kinesis.split_shard(stream_name, parent, (lo + hi + 1) // 2)
    kinesis.wait_active(stream_name)
    producer.put_rounds(3)
    wait_for(lambda: seen_keys(deliveries([worker])) >= producer.expected(), 40,
             "n1 to read the children, which are assigned only after the parent's SHARD_END")
    ended = [e for e in worker.of("checkpointed") if e["shard"] == parent]
    assert len(ended) == 1 and ended[0]["ends_shard"], ended  # the one checkpoint of the parent ended it
    lease = leases_by_shard(table).get(parent)
    assert lease is None or lease.is_shard_end  # deleted as drained, or SHARD_END
    worker.sigterm()
    assert worker.wait_exit(20) == 0, worker.stderr_tail()
    metrics = worker.of("stopped")[0]["metrics"]
    assert metrics["shards_ended"] == 1 and metrics["shard_ends_failed"] == 0, metrics
    assert metrics["shards_held_past_end"] == 0, metrics


# -- e. the blocking consumer -----------------------------------------------------------------------


def test_blocking_consumer_reads_checkpoints_and_releases(kinesis, table, stream_name, emulator_env) -> None:
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    producer.put_rounds(3)
    records = []
    with BlockingConsumer(stream_name, application_name=APP, worker_id="b1", lease_timing=TIMING,
                          idle_interval_s=0.1) as consumer:
        watchdog = threading.Timer(30, consumer.stop)  # the loop below ends even if records never come
        watchdog.start()
        try:
            for batch in consumer:
                records.extend(batch.records)
                batch.checkpoint()
                if len(records) >= producer.acknowledged:
                    consumer.stop()
        finally:
            watchdog.cancel()
        assert consumer.metrics.records == 30 and consumer.metrics.checkpoints >= 2
    assert {decode(r.data) for r in records} == producer.expected() and len(records) == 30
    last = {}
    for record in records:
        last[record.shard_id] = record.sequence_number  # in order within a shard
    view = table.scan()
    assert "b1" not in view.workers  # heartbeat removed
    assert {s: (l.owner, l.checkpoint) for s, l in view.leases.items()} == {
        s: (None, Checkpoint.sequence(seq)) for s, seq in last.items()
    }


# -- f. bad input -----------------------------------------------------------------------------------


def test_a_missing_stream_is_named(emulator_env) -> None:
    missing = f"no-such-stream-{uuid.uuid4().hex[:8]}"

    async def start() -> None:
        async with Consumer(missing, application_name=APP, handle_signals=False):
            pass

    with pytest.raises(StreamNotFoundError, match=missing):
        asyncio.run(start())
    with pytest.raises(StreamNotFoundError, match=missing), BlockingConsumer(missing, application_name=APP):
        pass


@pytest.mark.parametrize("position", ["yesterday", "", Position.after_sequence("1"), 42])
def test_a_bad_initial_position_is_a_configuration_error(dummy_credentials, position) -> None:
    with pytest.raises(ConfigurationError, match="initial_position"):
        Consumer("orders", application_name=APP, initial_position=position)


# -- g. a slow batch during a graceful shed ---------------------------------------------------------


def key_in(shard: dict[str, Any]) -> str:
    """A partition key whose MD5 lands in this shard's hash range."""
    lo, hi = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    for i in itertools.count():
        key = f"k{i}"
        if lo <= int(hashlib.md5(key.encode()).hexdigest(), 16) <= hi:
            return key
    raise AssertionError("unreachable")


def test_a_slow_batch_during_a_shed_costs_only_the_shed_lease(kinesis, table, stream_name, spawn) -> None:
    """Worker "slow" holds both shards and sits on a batch of shard 1 (the lease it sheds when a second
    worker joins) for longer than the failover time. The hand-off waits at most one renewal interval
    for that batch (release_timeout_s=30 notwithstanding), because the lease thread, which also sends
    the heartbeat, waits with it: "slow" stays alive and keeps shard 0, shard 1 moves to the newcomer,
    the late checkpoint raises LeaseLostError, and the newcomer delivers the batch again."""
    make_stream(kinesis, stream_name, 2)
    kept, shed = "shardId-000000000000", "shardId-000000000001"
    key = key_in({s["ShardId"]: s for s in kinesis.list_shards(stream_name)}[shed])
    kinesis.put_records(stream_name, [(key, f"{key}:{n}".encode()) for n in range(1, 6)])

    def owners() -> dict[str, str | None]:
        return {s: lease.owner for s, lease in leases_by_shard(table).items()}

    async def scenario() -> tuple[WorkerProc, list[int]]:
        async with Consumer(stream_name, application_name=APP, worker_id="slow", lease_timing=TIMING,
                            idle_interval_s=0.1, release_timeout_s=30.0, handle_signals=False) as consumer:
            batch = await asyncio.wait_for(consumer.__anext__(), 20)
            assert batch.shard_id == shed and consumer.held_shards() == [kept, shed]
            other = await asyncio.to_thread(spawn, "other", stream_name)
            deadline = time.monotonic() + 20
            while (await asyncio.to_thread(owners)).get(shed) != "other":
                assert time.monotonic() < deadline, "the newcomer never got the shed lease"
                await asyncio.sleep(0.1)
            moved_at = time.monotonic()
            while consumer.held_shards() != [kept]:  # released, or (on a slow machine) taken and noticed
                assert time.monotonic() < moved_at + RENEW, f"slow still holds {consumer.held_shards()}"
                await asyncio.sleep(0.02)
            while time.monotonic() < moved_at + FAILOVER + RENEW:  # still "processing" the batch
                assert (await asyncio.to_thread(owners))[kept] == "slow", "slow lost the lease it kept"
                assert consumer.held_shards() == [kept]
                await asyncio.sleep(0.25)
            with pytest.raises(LeaseLostError):
                await batch.checkpoint()
            assert consumer.metrics.leases_lost + consumer.metrics.leases_released == 1  # shard 1 only
            return other, [int(r.sequence_number) for r in batch.records]

    other, sequence_numbers = asyncio.run(scenario())
    def delivered_again() -> list[int]:
        return [seq for d in deliveries([other]) if d.shard == shed for _, _, seq in d.records]

    wait_for(lambda: len(delivered_again()) >= len(sequence_numbers), 10, "the newcomer to deliver the shed shard")
    assert delivered_again() == sequence_numbers
    other.sigterm()
    assert other.wait_exit(20) == 0, other.stderr_tail()


_SIGTERM_WHILE_STARTING = """
import asyncio, os, signal, sys
from kinesis_src import Consumer

class EarlySigterm(Consumer):
    async def start(self):
        prepare = self.units.prepare

        async def early(guard):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while start() is still running
            await prepare(guard)

        self.units.prepare = early
        await super().start()

async def main():
    async with EarlySigterm(sys.argv[1], application_name=sys.argv[2], worker_id="early") as consumer:
        async for batch in consumer:
            print("delivered", batch.shard_id, flush=True)
        print("iteration ended", flush=True)
    print("closed", consumer.metrics.leases_taken, consumer.metrics.leases_released, flush=True)

asyncio.run(main())
"""


def test_sigterm_while_starting_still_closes_gracefully(kinesis, table, stream_name, emulator_env) -> None:
    """The SIGTERM handler goes in before anything slow: a stop during start must not kill the process
    (exit -15 with leases held until failover), but end the iteration and release."""
    make_stream(kinesis, stream_name, 2)
    result = subprocess.run(
        [sys.executable, "-c", _SIGTERM_WHILE_STARTING, stream_name, APP],
        env={**os.environ, **emulator_env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "delivered" not in result.stdout and "iteration ended" in result.stdout
    taken, released = map(int, result.stdout.split("closed")[1].split())
    assert taken == 0 and released == 0  # leases came in while stopping: released by the coordinator itself
    assert all(lease.owner is None for lease in table.list_leases())
