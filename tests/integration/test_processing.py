"""Parallel processing (``process()``) on kinesis-mock + DynamoDB Local, with real worker processes.

Workers are tests/integration/processing_worker.py: one Consumer each,
records processed with ``process()`` in "key" mode, every handler call
reported as a JSON line with the worker's ``time.monotonic()`` (one clock
for every process on Linux). Some records always fail: they must reach the
dead letter stream after exactly ``max_delivery_attempts`` deliveries.
Nothing sleeps to synchronize: every wait polls a condition with a deadline.

What "correct" means in the main test:

* at least once: every record that is not poison has a handler call, and
  is covered by its shard's checkpoint (open shards checkpointed at their
  last record, closed ones at SHARD_END);
* per-key order by first processing time: taking each record at its first
  handler call (across all workers, in time order), every key's counters
  increase, through a split, a SIGKILL and a merge;
* dead letters: the poison records and nothing else are in the DLQ stream,
  each envelope naming its origin (stream, shard, sequence) with
  ``delivery_count`` equal to ``max_delivery_attempts``; no handler call ever
  saw a larger count.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import waiting  # tests/waiting.py
from worker_process import WorkerProcess, spawned  # tests/worker_process.py

from kinesis_src import (
    BlockingConsumer,
    Consumer,
    LeaseTiming,
    read_table,
)
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.processing import DeliveredRecord, process
from kinesis_src.errors import ConfigurationError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy
from kinesis_src.testing import KeyedProducer, decode

pytestmark = pytest.mark.integration

WORKER = Path(__file__).resolve().parent / "processing_worker.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
APP = "processing-tests"
RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0)
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)
MAX_ATTEMPTS = 3
POISON_KEYS = ("key-003", "key-011")
POISON_EVERY = 4


def wait_for(condition: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition", poll_s: float = 0.05) -> Any:
    return waiting.wait_for(condition, timeout_s, what, poll_s)


def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)


@pytest.fixture
def dynamodb(emulator_env: dict[str, str]) -> DynamoDBClient:
    return DynamoDBClient(AwsSettings.from_env(retry=RETRY))


class WorkerProc(WorkerProcess):
    """One processing_worker.py process; a reader thread collects its events."""

    def __init__(self, worker_id: str, stream: str, env: dict[str, str], log_dir: Path, *extra: str) -> None:
        argv = [sys.executable, str(WORKER), "--stream", stream, "--application", APP, "--worker-id", worker_id, *extra]
        super().__init__(worker_id, argv, env, log_dir)


@pytest.fixture
def spawn(emulator_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest):
    env = {**os.environ, **emulator_env, "PYTHONPATH": str(REPO_ROOT), "PROCESSING_WORKER_LOG": "INFO"}
    with spawned(request, lambda worker_id, stream, *extra: WorkerProc(worker_id, stream, env, tmp_path, *extra)) as start:
        yield start


def calls_of(workers: list[WorkerProc]) -> list[dict[str, Any]]:
    return sorted((e for w in workers for e in w.of("call")), key=lambda e: e["t"])


def dead_letters(kinesis: KinesisClient, stream: str) -> list[dict[str, Any]]:
    table = read_table(stream, kinesis=kinesis, progress=False)
    return [json.loads(data) for data in table.column("data").to_pylist()]


def is_poison(key: str, n: int) -> bool:
    return key in POISON_KEYS and n % POISON_EVERY == 0


def unfinished_leases(kinesis: KinesisClient, stream: str, table: LeaseTable, last: dict[str, int]) -> list[str]:
    """Closed shards not at SHARD_END, open shards not checkpointed at their last record (a deleted
    lease counts as drained)."""
    leases = {lease.shard_id: lease for lease in table.list_leases()}
    problems = []
    for shard in kinesis.list_shards(stream):
        shard_id = shard["ShardId"]
        lease = leases.get(shard_id)
        if lease is None or lease.is_shard_end:
            continue
        if "EndingSequenceNumber" in shard["SequenceNumberRange"]:
            problems.append(f"{shard_id}: closed, lease at {lease.checkpoint}")
        elif shard_id in last and lease.checkpoint.sequence_number != str(last[shard_id]):
            problems.append(f"{shard_id}: lease at {lease.checkpoint}, last record {last[shard_id]}")
    return problems


# -- the main scenario -------------------------------------------------------------------------


def test_through_a_split_a_sigkill_and_a_merge_every_record_is_processed_in_key_order_and_poison_is_dead_lettered(
    kinesis, dynamodb, stream_name, spawn
) -> None:
    began = time.monotonic()
    dlq = f"{stream_name}-dlq"
    make_stream(kinesis, stream_name, 2)
    make_stream(kinesis, dlq, 1)
    args = ("--dlq", dlq, "--max-attempts", str(MAX_ATTEMPTS), "--poison-keys", ",".join(POISON_KEYS),
            "--poison-every", str(POISON_EVERY), "--max-in-flight", "16", "--sleep-ms", "10")
    workers = {name: spawn(name, stream_name, *args) for name in ("w1", "w2")}
    wait_for(lambda: all(w.of("started") for w in workers.values()), 60, "two workers to start")
    table = LeaseTable(dynamodb, default_table_name(APP), APP, stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=20)
    producer.put_rounds(6)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**126)  # -> 2 (lower), 3 (upper)
    kinesis.wait_active(stream_name)
    producer.put_rounds(6)
    victim = workers["w1"]
    wait_for(lambda: len(victim.of("call")) >= 40, 30, "w1 to process records")
    killed_at = time.monotonic()
    victim.kill()
    workers["w3"] = spawn("w3", stream_name, *args)
    producer.put_rounds(6)
    kinesis.merge_shards(stream_name, "shardId-000000000003", "shardId-000000000001")  # -> 4
    kinesis.wait_active(stream_name)
    producer.put_rounds(6)
    produced = producer.expected()
    poison = {r for r in produced if is_poison(*r)}
    everyone = list(workers.values())

    def finished() -> bool:
        called = {(e["key"], e["n"]) for e in calls_of(everyone)}
        if not produced <= called:
            return False
        letters = {decode(base64.b64decode(d["data"])) for d in dead_letters(kinesis, dlq)}
        if letters != poison:
            return False
        last: dict[str, int] = {}
        for e in calls_of(everyone):
            last[e["shard"]] = max(last.get(e["shard"], 0), int(e["seq"]))
        return not unfinished_leases(kinesis, stream_name, table, last)

    wait_for(finished, 45, "every record processed, the poison dead-lettered, every lease at its end", poll_s=0.3)
    for name in ("w2", "w3"):
        os.kill(workers[name].proc.pid, signal.SIGTERM)
    for name in ("w2", "w3"):
        assert workers[name].wait_exit(30) == 0, workers[name].stderr_tail()
        assert workers[name].of("stopped"), name

    calls = calls_of(everyone)
    print(f"processing scenario: {len(produced)} records ({len(poison)} poison), {len(calls)} handler calls, "
          f"{time.monotonic() - began:.1f}s; w1 killed after {len(victim.of('call'))} calls")
    assert {(e["key"], e["n"]) for e in calls} == produced  # at least once, nothing invented

    # Per-key order by first processing time, across workers and reshards.
    first: dict[tuple[str, int], float] = {}
    for e in calls:
        first.setdefault((e["key"], e["n"]), e["t"])
    by_key: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for (key, n), t in first.items():
        by_key[key].append((t, n))
    for key, seen in by_key.items():
        counters = [n for _, n in sorted(seen)]
        assert counters == sorted(counters), f"{key} first processed out of order: {counters}"
    assert any(e["t"] > killed_at and e["worker"] != "w1" for e in calls), "nobody processed after the kill"
    shards_called = {e["shard"] for e in calls}
    assert {f"shardId-00000000000{i}" for i in range(5)} <= shards_called, shards_called

    # Dead letters: exactly the poison, each after MAX_ATTEMPTS deliveries; never a larger count.
    letters = dead_letters(kinesis, dlq)
    assert {decode(base64.b64decode(d["data"])) for d in letters} == poison
    origins = {(e["shard"], e["seq"]) for e in calls}
    for d in letters:
        assert (d["stream"], d["delivery_count"], d["outcome"], d["error"]["type"]) == (
            stream_name, MAX_ATTEMPTS, "failed", "RuntimeError"), d
        assert (d["shard_id"], d["sequence_number"]) in origins
    assert max(e["count"] for e in calls) <= MAX_ATTEMPTS
    for record in poison:
        seen = sorted(e["count"] for e in calls if (e["key"], e["n"]) == record)
        assert MAX_ATTEMPTS in seen, f"{record} dead-lettered without a last attempt: {seen}"
    survivors = {name: workers[name].of("stopped")[0]["metrics"] for name in ("w2", "w3")}
    print(f"survivors: {survivors}")


# -- bad input against the real servers --------------------------------------------------------


def consumer_for(stream: str, worker_id: str) -> Consumer:
    return Consumer(stream, application_name=APP, worker_id=worker_id, lease_timing=TIMING,
                    idle_interval_s=0.1, handle_signals=False)


def test_a_second_worker_with_another_ordering_fails_naming_the_first_and_a_missing_dead_letter_stream_fails_naming_it(
    kinesis, dynamodb, stream_name
) -> None:
    make_stream(kinesis, stream_name, 1)
    KeyedProducer(kinesis, stream_name, keys=3).put_rounds(2)

    async def scenario() -> None:
        calls: list[str] = []

        async def handler(record: DeliveredRecord) -> None:
            calls.append(record.sequence_number)

        async with consumer_for(stream_name, "first") as first, consumer_for(stream_name, "second") as second:
            with pytest.raises(ConfigurationError, match=rf"dead_letter stream '{stream_name}-missing'"):
                await process(first, handler, dead_letter=f"{stream_name}-missing")
            task = asyncio.create_task(process(first, handler, ordering="key"))
            deadline = asyncio.get_running_loop().time() + 20
            while len(calls) < 6:  # the first worker claimed "key" and processes
                assert asyncio.get_running_loop().time() < deadline, "the first worker processed nothing"
                assert not task.done(), task
                await asyncio.sleep(0.02)
            with pytest.raises(ConfigurationError, match="ordering='unordered' conflicts with ordering='key'"):
                await process(second, handler, ordering="unordered")
            assert len(calls) == 6  # the refused worker processed nothing
            first.stop()
            await task

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_blocking_consumer_process_runs_a_sync_handler_on_threads_in_key_order_and_checkpoints_the_last_record(
    kinesis, dynamodb, stream_name
) -> None:
    make_stream(kinesis, stream_name, 1)
    producer = KeyedProducer(kinesis, stream_name, keys=4)
    producer.put_rounds(10)
    lock = threading.Lock()
    running: set[str] = set()
    seen: dict[str, list[int]] = defaultdict(list)
    peak = 0

    with BlockingConsumer(stream_name, application_name=APP, worker_id="blocking", lease_timing=TIMING,
                          idle_interval_s=0.1, handle_signals=False) as consumer:

        def handler(record: DeliveredRecord) -> None:
            nonlocal peak
            key, n = decode(record.data)
            with lock:
                assert key not in running
                running.add(key)
                peak = max(peak, len(running))
            time.sleep(0.01)
            with lock:
                running.discard(key)
                seen[key].append(n)
                if sum(map(len, seen.values())) == 40:
                    consumer.stop()

        metrics = consumer.process(handler, max_in_flight=8, checkpoint_interval_s=0.1)

    assert {(k, n) for k, ns in seen.items() for n in ns} == producer.expected()
    assert all(ns == sorted(ns) for ns in seen.values()), seen
    assert peak > 1 and metrics.accepted == 40
    (lease,) = LeaseTable(dynamodb, default_table_name(APP), APP, stream_name).list_leases()
    last = max(int(s["SequenceNumberRange"]["StartingSequenceNumber"]) for s in kinesis.list_shards(stream_name))
    assert lease.checkpoint.sequence_number is not None and int(lease.checkpoint.sequence_number) > last
