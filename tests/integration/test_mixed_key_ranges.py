"""Sticky workers and workers without a range in one application, on kinesis-mock + DynamoDB Local.

Worker processes (tests/integration/consumer_worker.py, checkpointing every batch):

* a worker without a range reads alone, then a sticky ``0/2`` worker joins
  mid-stream; then the stream is split and merged: every record is delivered
  exactly once, and once the sticky worker has started, keys of ``0/2``
  reach it alone (the worker without a range hands the whole space over at
  its checkpoints and keeps reading the other half);
* a sticky worker closes: the worker without a range takes its unit over
  at once; a sticky worker of the same range starts: the unit (no split
  this time) is handed back. Exactly once throughout;
* the sticky worker is SIGKILLed: the worker without a range takes its unit
  over after the failover time, nothing is lost, and the only records
  delivered twice are in batches the dead worker never checkpointed;
* three workers without a range share the unit's shards when a sticky
  worker claims ``0/2``: each hands its part over at its checkpoints (one
  split, several holders), and when the sticky worker closes they take the
  range back between them;
* one of two workers without a range is paused (SIGSTOP) as the claim
  comes: the split waits out its heartbeat, then cuts over; resumed, it
  acknowledges nothing of what it lost (no record acknowledged twice, the
  split unit's leases stay gone);
* two sticky workers claim both halves at once from two workers without a
  range: those read nothing while both claims live, and everything again
  once the sticky workers close.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest
import waiting  # tests/waiting.py
from test_consumer import (
    APP,
    FAILOVER,
    REPO_ROOT,
    Delivery,
    WorkerProc,
    deliveries,
    make_stream,
    split_then_merge_mid_read,
)
from worker_process import spawned  # tests/worker_process.py

from kinesis_src import KeyRange
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.units import FULL, scope_of
from kinesis_src.leases.model import Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.testing import KeyedProducer
from lineage import hash_key_of

pytestmark = pytest.mark.integration

LOWER = KeyRange.slice(0, 2)

Workers = Callable[..., WorkerProc]  # the fixture: workers(worker_id, stream, *worker arguments)


@pytest.fixture
def workers(emulator_env, tmp_path, request):
    env = {**os.environ, **emulator_env, "PYTHONPATH": str(REPO_ROOT), "CONSUMER_WORKER_LOG": "INFO"}
    with spawned(request, lambda worker_id, stream, *extra: WorkerProc(worker_id, stream, env, tmp_path, *extra)) as start:
        yield start


def delivered_all(producer: KeyedProducer, procs: list[WorkerProc]):
    return lambda: producer.expected() <= {(k, n) for d in deliveries(procs) for k, n, _ in d.records}


def a_stream_read_by(
    kinesis: KinesisClient, stream: str, workers: Workers, *plain_ids: str, shards: int = 2
) -> tuple[KeyedProducer, list[WorkerProc]]:
    """Every test's opening: a stream, two rounds put, then workers without a range (``plain_ids``) started."""
    make_stream(kinesis, stream, shards)
    producer = KeyedProducer(kinesis, stream, keys=30)
    producer.put_rounds(2)
    return producer, [workers(worker_id, stream, "--idle", "0.1") for worker_id in plain_ids]


def sticky_worker(workers: Workers, stream: str, worker_id: str = "sticky") -> WorkerProc:
    """A worker claiming ``LOWER`` (``0/2``)."""
    return workers(worker_id, stream, "--key-range", "0/2", "--idle", "0.1")


def start_while_putting(producer: KeyedProducer, proc: WorkerProc) -> float:
    """Put a round a second until ``proc`` has started (records arrive during its cut-over); its start time."""
    deadline = time.monotonic() + 60
    while not proc.started():
        assert time.monotonic() < deadline and proc.proc.poll() is None, proc.stderr_tail()
        producer.put_rounds(1)
        with contextlib.suppress(AssertionError):
            waiting.wait_for(proc.started, 1.0, f"{proc.worker_id} to start", 0.1)
    return proc.of("started")[0]["t"]


def stop_gracefully(procs: list[WorkerProc]) -> None:
    """SIGTERM all at once (their hand-overs overlap), then each must exit 0."""
    for proc in procs:
        proc.sigterm()
    for proc in procs:
        assert proc.wait_exit(30) == 0, proc.stderr_tail()


def copies_of(producer: KeyedProducer, delivered: list[Delivery]) -> Counter:
    """How many times each record was delivered; every record Kinesis acknowledged must be there, no other."""
    copies = Counter((k, n) for d in delivered for k, n, _ in d.records)
    assert set(copies) == producer.expected()
    return copies


def assert_exactly_once(copies: Counter) -> None:
    assert max(copies.values()) == 1, f"delivered twice: {[r for r, c in copies.items() if c > 1][:5]}"


def unacknowledged(procs: list[WorkerProc], delivered: list[Delivery]) -> set[tuple[str, int]]:
    """Records of the batches whose checkpoint their worker never saw succeed: the only ones allowed twice."""
    acknowledged = {(p.worker_id, e["shard"], e["holding"], e["index"]) for p in procs for e in p.of("checkpointed")}
    return {(k, n) for d in delivered if (d.worker, d.shard, d.holding, d.index) not in acknowledged
            for k, n, _ in d.records}


def at_least_once(producer: KeyedProducer, procs: list[WorkerProc]) -> tuple[list[Delivery], Counter, set]:
    """Every delivery, each record's copies and the records never checkpointed; a record delivered
    twice must be one of those (the only duplicates a hand-over may cause)."""
    delivered = deliveries(procs)
    copies = copies_of(producer, delivered)
    never_checkpointed = unacknowledged(procs, delivered)
    twice = {r for r, c in copies.items() if c > 1}
    assert twice <= never_checkpointed, f"delivered twice though checkpointed: {sorted(twice - never_checkpointed)[:5]}"
    return delivered, copies, never_checkpointed


def assert_in_key_order(delivered: list[Delivery]) -> None:
    """Per key, one reader at a time: first deliveries, in time order across workers, follow the key's counter."""
    last: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    for d in delivered:
        for key, n, _ in d.records:
            if (key, n) in seen:
                continue  # a redelivery: whether it was allowed is checked against the checkpoints
            seen.add((key, n))
            assert n > last.get(key, 0), f"{key}:{n} after {key}:{last[key]}"
            last[key] = n


def signal_group(proc: WorkerProc, sig: signal.Signals) -> float:
    """Send ``sig`` to the worker's process group (SIGSTOP pauses every thread of it); when it was sent."""
    sent = time.monotonic()
    os.killpg(proc.proc.pid, sig)
    return sent


def lower_times(delivered: list[Delivery], worker_ids: set[str]) -> list[float]:
    """When ``worker_ids`` delivered records of keys in ``LOWER``."""
    return [d.t for d in delivered if d.worker in worker_ids for k, _, _ in d.records if hash_key_of(k) in LOWER]


def test_a_sticky_worker_joins_a_worker_without_a_range_through_a_split_and_a_merge(
    kinesis, stream_name, workers
) -> None:
    producer, [plain] = a_stream_read_by(kinesis, stream_name, workers, "plain")
    waiting.wait_for(delivered_all(producer, [plain]), 60, "the worker without a range to read alone", 0.1)
    sticky = sticky_worker(workers, stream_name)
    cut_over = start_while_putting(producer, sticky)
    producer.put_rounds(2)
    split_then_merge_mid_read(kinesis, stream_name, producer)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "every record after the split and the merge", 0.1)
    stop_gracefully([plain, sticky])

    delivered = deliveries([plain, sticky])
    assert_exactly_once(copies_of(producer, delivered))
    for d in delivered:
        for key, n, _ in d.records:
            if d.worker == "sticky":
                assert hash_key_of(key) in LOWER, f"{key}:{n} is outside the sticky worker's range"
            elif hash_key_of(key) in LOWER:
                assert d.t < cut_over, f"{key}:{n} of the sticky range reached the other worker after the cut-over"
    assert {d.worker for d in delivered if d.t > cut_over} == {"plain", "sticky"}
    assert lower_times(delivered, {"plain"})
    assert {"shardId-000000000002", "shardId-000000000004"} <= {d.shard for d in delivered}
    assert_in_key_order(delivered)


def test_a_killed_sticky_worker_s_unit_is_taken_over_at_its_checkpoints(kinesis, stream_name, workers) -> None:
    producer, [plain] = a_stream_read_by(kinesis, stream_name, workers, "plain")
    sticky = sticky_worker(workers, stream_name)
    start_while_putting(producer, sticky)  # plain alone may read the first rounds before the claim lands
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 60, "the next rounds", 0.1)
    waiting.wait_for(lambda: deliveries([sticky]), 60, "the sticky worker to read its range", 0.1)
    sticky.sigkill()
    sticky.wait_exit(10)
    producer.put_rounds(3)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "the other worker to take the unit over", 0.1)
    stop_gracefully([plain])

    delivered = deliveries([plain, sticky])
    copies = copies_of(producer, delivered)
    never_checkpointed = unacknowledged([sticky], [d for d in delivered if d.worker == "sticky"])
    twice = {r for r, c in copies.items() if c > 1}
    assert max(copies.values()) <= 2
    assert twice <= never_checkpointed, f"delivered twice though checkpointed: {sorted(twice - never_checkpointed)[:5]}"
    assert all(hash_key_of(k) in LOWER for k, _ in twice)
    assert any(t > sticky.events[-1]["t"] for t in lower_times(delivered, {"plain"}))  # taken over


def test_a_unit_goes_back_and_forth_between_a_sticky_worker_and_one_without_a_range(
    kinesis, stream_name, workers
) -> None:
    """Graceful moves only (close, then a sticky worker again, no split the second time): exactly once."""
    producer, [plain] = a_stream_read_by(kinesis, stream_name, workers, "plain")
    first = sticky_worker(workers, stream_name, "sticky-1")
    waiting.wait_for(delivered_all(producer, [plain, first]), 60, "both workers to read", 0.1)
    stop_gracefully([first])
    left = first.of("stopped")[0]["t"]
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, first]), 60, "the worker without a range to take over", 0.1)
    second = sticky_worker(workers, stream_name, "sticky-2")
    back = start_while_putting(producer, second)
    producer.put_rounds(2)
    procs = [plain, first, second]
    waiting.wait_for(delivered_all(producer, procs), 60, "every record", 0.1)
    stop_gracefully([plain, second])

    delivered = deliveries(procs)
    assert_exactly_once(copies_of(producer, delivered))
    lower_by_plain = lower_times(delivered, {"plain"})
    assert any(left < t < back for t in lower_by_plain)  # it read the unit between the two sticky workers
    assert all(t < back for t in lower_by_plain)  # and never after the second one started
    assert all(hash_key_of(k) in LOWER for d in delivered if d.worker != "plain" for k, _, _ in d.records)


PLAIN = ("plain-1", "plain-2", "plain-3")


def test_workers_without_a_range_sharing_the_unit_each_hand_their_part_over_and_take_it_back(
    kinesis, stream_name, workers
) -> None:
    """One split of the full-space unit, its four shards held by three workers: each hands its own over."""
    producer, plain = a_stream_read_by(kinesis, stream_name, workers, *PLAIN, shards=4)
    waiting.wait_for(lambda: all(p.held() for p in plain), 60, "each worker without a range to hold shards", 0.1)
    producer.put_rounds(1)
    waiting.wait_for(delivered_all(producer, plain), 60, "the workers without a range to read", 0.1)
    before = {d.worker for d in deliveries(plain)}
    sticky = sticky_worker(workers, stream_name)
    cut_over = start_while_putting(producer, sticky)
    producer.put_rounds(2)
    procs = [*plain, sticky]
    waiting.wait_for(delivered_all(producer, procs), 90, "every record after the claim", 0.1)
    stop_gracefully([sticky])
    left = sticky.of("stopped")[0]["t"]
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, procs), 90, "the workers without a range to take the range back", 0.1)
    stop_gracefully(plain)

    delivered, copies, _ = at_least_once(producer, procs)
    print(f"shared unit: {len(copies)} records, {sum(c > 1 for c in copies.values())} delivered twice (never checkpointed)")
    assert before == set(PLAIN)  # every one of them held part of the unit when the claim came
    assert all(hash_key_of(k) in LOWER for d in delivered if d.worker == "sticky" for k, _, _ in d.records)
    late = [t for t in lower_times(delivered, set(PLAIN)) if t > cut_over]
    assert all(t > left for t in late), "a key of the sticky range reached a worker without a range while claimed"
    assert late  # taken back once the sticky worker left
    lower_shards = {"shardId-000000000000", "shardId-000000000001"}  # of four: the hash space in quarters
    assert lower_shards <= {d.shard for d in delivered if d.worker == "sticky"}
    assert_in_key_order(delivered)


def test_a_paused_worker_without_a_range_is_split_past_and_fenced_when_it_resumes(
    kinesis, stream_name, workers
) -> None:
    """One of two workers sharing the unit stops answering (SIGSTOP) as a sticky worker claims ``0/2``: the
    split waits for its heartbeat to go stale, takes its lease and cuts over; resumed, it checkpoints nothing
    it lost, and what it delivers again (a batch fetched before the pause) is never acknowledged."""
    producer, plain = a_stream_read_by(kinesis, stream_name, workers, "plain-1", "plain-2")
    waiting.wait_for(lambda: all(p.held() for p in plain), 60, "each worker without a range to hold a shard", 0.1)
    waiting.wait_for(delivered_all(producer, plain), 60, "the workers without a range to read", 0.1)
    paused = plain[0]
    stopped = signal_group(paused, signal.SIGSTOP)
    sticky = sticky_worker(workers, stream_name)
    cut_over = start_while_putting(producer, sticky)
    producer.put_rounds(2)
    procs = [*plain, sticky]
    waiting.wait_for(delivered_all(producer, procs), 90, "every record while one worker is paused", 0.1)
    resumed = signal_group(paused, signal.SIGCONT)
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, procs), 90, "every record after the resume", 0.1)
    stop_gracefully([*plain, sticky])

    delivered, copies, never_checkpointed = at_least_once(producer, procs)
    assert cut_over - stopped >= FAILOVER * 0.9  # the split waited for the paused worker's heartbeat
    late_lower = {(k, n) for d in delivered if d.worker != "sticky" and d.t > cut_over
                  for k, n, _ in d.records if hash_key_of(k) in LOWER}
    assert late_lower <= never_checkpointed, f"the sticky range acknowledged elsewhere: {sorted(late_lower)[:5]}"
    delivered_at = {(d.shard, d.holding, d.index): d.t for d in delivered if d.worker == paused.worker_id}
    lost = {(shard, holding) for (shard, holding, _), t in delivered_at.items() if t < stopped}
    late = [(e["shard"], e["holding"], e["index"]) for e in paused.of("checkpointed")
            if e["t"] > resumed and (e["shard"], e["holding"]) in lost]
    # a checkpoint reported after the resume is one sent before the pause (it landed before the split)
    assert all(delivered_at[batch] < stopped for batch in late), f"a lost lease took a new checkpoint: {late}"
    assert unit_leases(stream_name, FULL) == [], "the split unit's leases came back"
    print(f"paused: {len(copies)} records, {sum(c > 1 for c in copies.values())} delivered twice, "
          f"{len(late_lower)} of the sticky range by a worker without a range after the cut-over, {len(late)} checkpoint(s) reported after the resume")


def unit_leases(stream: str, unit: KeyRange) -> list[Lease]:
    """The leases of one unit of ``stream`` in the tests' application."""
    dynamodb = DynamoDBClient(AwsSettings.from_env())
    return LeaseTable(dynamodb, default_table_name(APP), APP, stream, scope=scope_of(unit)).list_leases()


def test_two_sticky_workers_claiming_both_halves_at_once_take_the_unit_from_two_workers_without_a_range(
    kinesis, stream_name, workers
) -> None:
    """Both claims cut the one full-space unit at the same moment (one split, finished by either); the workers
    without a range, left with no unit, read nothing until the sticky workers close, then take it all back."""
    producer, plain = a_stream_read_by(kinesis, stream_name, workers, "plain-1", "plain-2", shards=4)
    waiting.wait_for(lambda: all(p.held() for p in plain), 60, "each worker without a range to hold shards", 0.1)
    waiting.wait_for(delivered_all(producer, plain), 60, "the workers without a range to read", 0.1)
    halves = {"lower": LOWER, "upper": KeyRange.slice(1, 2)}
    sticky = {name: workers(name, stream_name, "--key-range", f"{i}/2", "--idle", "0.1")
              for i, name in enumerate(halves)}
    both = max(start_while_putting(producer, proc) for proc in sticky.values())
    producer.put_rounds(2)
    procs = [*plain, *sticky.values()]
    waiting.wait_for(delivered_all(producer, procs), 90, "every record after both claims", 0.1)
    terminated = time.monotonic()
    stop_gracefully(list(sticky.values()))
    left = max(proc.of("stopped")[0]["t"] for proc in sticky.values())
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, procs), 90, "the workers without a range to take it all back", 0.1)
    stop_gracefully(plain)

    delivered, copies, _ = at_least_once(producer, procs)
    for name, half in halves.items():
        assert all(hash_key_of(k) in half for d in delivered if d.worker == name for k, _, _ in d.records)
        assert any(d.worker == name and d.records for d in delivered), f"{name} read nothing"
    idle = [d for d in delivered if d.worker.startswith("plain") and both < d.t < terminated and d.records]
    assert not idle, f"a worker without a range read while both halves were claimed: {idle[0]}"
    assert {d.worker for d in delivered if d.t > left and d.records} <= {"plain-1", "plain-2"}
    assert any(d.t > left for d in delivered if d.worker.startswith("plain") and d.records)
    assert_in_key_order(delivered)
    print(f"both halves: {len(copies)} records, {sum(c > 1 for c in copies.values())} delivered twice")
