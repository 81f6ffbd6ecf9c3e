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
  delivered twice are in batches the dead worker never checkpointed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter

import pytest
import waiting  # tests/waiting.py
from test_consumer import REPO_ROOT, WorkerProc, deliveries, make_stream
from worker_process import spawned  # tests/worker_process.py

from kinesis_src import KeyRange
from kinesis_src.workload import KeyedProducer
from lineage import hash_key_of

pytestmark = pytest.mark.integration

LOWER = KeyRange.slice(0, 2)


@pytest.fixture
def workers(emulator_env, tmp_path, request):
    env = {**os.environ, **emulator_env, "PYTHONPATH": str(REPO_ROOT), "CONSUMER_WORKER_LOG": "INFO"}
    with spawned(request, lambda worker_id, stream, *extra: WorkerProc(worker_id, stream, env, tmp_path, *extra)) as start:
        yield start


def delivered_all(producer: KeyedProducer, procs: list[WorkerProc]):
    return lambda: producer.expected() <= {(k, n) for d in deliveries(procs) for k, n, _ in d.records}


def test_a_sticky_worker_joins_a_worker_without_a_range_through_a_split_and_a_merge(
    kinesis, stream_name, workers
) -> None:
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    plain = workers("plain", stream_name, "--idle", "0.1")
    waiting.wait_for(delivered_all(producer, [plain]), 60, "the worker without a range to read alone", 0.1)
    sticky = workers("sticky", stream_name, "--key-range", "0/2", "--idle", "0.1")
    cut_over = start_while_putting(producer, sticky)
    producer.put_rounds(2)
    first = kinesis.list_shards(stream_name)[0]
    lo, hi = int(first["HashKeyRange"]["StartingHashKey"]), int(first["HashKeyRange"]["EndingHashKey"])
    kinesis.split_shard(stream_name, "shardId-000000000000", (lo + hi + 1) // 2)  # -> 2 (lower), 3 (upper)
    kinesis.wait_active(stream_name)
    producer.put_rounds(2)
    kinesis.merge_shards(stream_name, "shardId-000000000003", "shardId-000000000001")  # -> 4
    kinesis.wait_active(stream_name)
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "every record after the split and the merge", 0.1)
    for proc in (plain, sticky):
        proc.sigterm()
    for proc in (plain, sticky):
        assert proc.wait_exit(30) == 0, proc.stderr_tail()

    delivered = deliveries([plain, sticky])
    copies = Counter((k, n) for d in delivered for k, n, _ in d.records)
    assert set(copies) == producer.expected()
    assert max(copies.values()) == 1, f"delivered twice: {[r for r, c in copies.items() if c > 1][:5]}"
    for d in delivered:
        for key, n, _ in d.records:
            if d.worker == "sticky":
                assert hash_key_of(key) in LOWER, f"{key}:{n} is outside the sticky worker's range"
            elif hash_key_of(key) in LOWER:
                assert d.t < cut_over, f"{key}:{n} of the sticky range reached the other worker after the cut-over"
    assert {d.worker for d in delivered if d.t > cut_over} == {"plain", "sticky"}
    assert any(hash_key_of(k) in LOWER for d in delivered if d.worker == "plain" for k, _, _ in d.records)
    assert {"shardId-000000000002", "shardId-000000000004"} <= {d.shard for d in delivered}
    last: dict[str, int] = {}
    for d in delivered:  # per key, one reader at a time: delivery order (across the two) is the key's order
        for key, n, _ in d.records:
            assert n > last.get(key, 0), f"{key}:{n} after {key}:{last[key]}"
            last[key] = n


def test_a_killed_sticky_worker_s_unit_is_taken_over_at_its_checkpoints(kinesis, stream_name, workers) -> None:
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    plain = workers("plain", stream_name, "--idle", "0.1")
    sticky = workers("sticky", stream_name, "--key-range", "0/2", "--idle", "0.1")
    start_while_putting(producer, sticky)  # plain alone may read the first rounds before the claim lands
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 60, "the next rounds", 0.1)
    waiting.wait_for(lambda: deliveries([sticky]), 60, "the sticky worker to read its range", 0.1)
    sticky.sigkill()
    sticky.wait_exit(10)
    producer.put_rounds(3)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "the other worker to take the unit over", 0.1)
    plain.sigterm()
    assert plain.wait_exit(30) == 0, plain.stderr_tail()

    delivered = deliveries([plain, sticky])
    copies = Counter((k, n) for d in delivered for k, n, _ in d.records)
    assert set(copies) == producer.expected()
    acknowledged = {(e["shard"], e["holding"], e["index"]) for e in sticky.of("checkpointed")}
    unacknowledged = {(k, n) for d in delivered if d.worker == "sticky"
                      and (d.shard, d.holding, d.index) not in acknowledged for k, n, _ in d.records}
    twice = {r for r, c in copies.items() if c > 1}
    assert max(copies.values()) <= 2
    assert twice <= unacknowledged, f"delivered twice though checkpointed: {sorted(twice - unacknowledged)[:5]}"
    assert all(hash_key_of(k) in LOWER for k, _ in twice)
    taken_over = [d for d in delivered if d.worker == "plain" and d.t > sticky.events[-1]["t"]]
    assert any(hash_key_of(k) in LOWER for d in taken_over for k, _, _ in d.records)


def start_while_putting(producer: KeyedProducer, proc: WorkerProc) -> float:
    """Put a round a second until ``proc`` has started (records arrive during its cut-over); its start time."""
    deadline = time.monotonic() + 60
    while not proc.started():
        assert time.monotonic() < deadline and proc.proc.poll() is None, proc.stderr_tail()
        producer.put_rounds(1)
        with contextlib.suppress(AssertionError):
            waiting.wait_for(proc.started, 1.0, f"{proc.worker_id} to start", 0.1)
    return proc.of("started")[0]["t"]


def test_a_unit_goes_back_and_forth_between_a_sticky_worker_and_one_without_a_range(
    kinesis, stream_name, workers
) -> None:
    """Graceful moves only (close, then a sticky worker again, no split the second time): exactly once."""
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    plain = workers("plain", stream_name, "--idle", "0.1")
    first = workers("sticky-1", stream_name, "--key-range", "0/2", "--idle", "0.1")
    waiting.wait_for(delivered_all(producer, [plain, first]), 60, "both workers to read", 0.1)
    first.sigterm()
    assert first.wait_exit(30) == 0, first.stderr_tail()
    left = first.of("stopped")[0]["t"]
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, first]), 60, "the worker without a range to take over", 0.1)
    second = workers("sticky-2", stream_name, "--key-range", "0/2", "--idle", "0.1")
    back = start_while_putting(producer, second)
    producer.put_rounds(2)
    procs = [plain, first, second]
    waiting.wait_for(delivered_all(producer, procs), 60, "every record", 0.1)
    for proc in (plain, second):
        proc.sigterm()
    for proc in (plain, second):
        assert proc.wait_exit(30) == 0, proc.stderr_tail()

    delivered = deliveries(procs)
    copies = Counter((k, n) for d in delivered for k, n, _ in d.records)
    assert set(copies) == producer.expected()
    assert max(copies.values()) == 1, f"delivered twice: {[r for r, c in copies.items() if c > 1][:5]}"
    lower_by_plain = [d.t for d in delivered if d.worker == "plain" for k, _, _ in d.records if hash_key_of(k) in LOWER]
    assert any(left < t < back for t in lower_by_plain)  # it read the unit between the two sticky workers
    assert all(t < back for t in lower_by_plain)  # and never after the second one started
    assert all(hash_key_of(k) in LOWER for d in delivered if d.worker != "plain" for k, _, _ in d.records)
