"""``format("kinesis")`` on a real Spark standalone cluster: executor and driver SIGKILLed, exactly once.

A master and two 1-core workers (separate JVMs, pip's pyspark) run the
streaming query submitted with ``spark-submit --py-files kinesis_src.zip``;
no Python in the cluster has kinesis-src installed. While keyed records go
in through a split and a merge:

(a) one executor JVM (``CoarseGrainedExecutorBackend``, found in /proc) is
    SIGKILLed while it runs a task of an uncommitted batch: the task fails
    with the executor, Spark re-runs it on another executor, and the
    worker launches a replacement;
(b) the driver is SIGKILLed while a batch is read but not committed, and
    the query restarts from its checkpoint (AvailableNow).

The committed output holds every acknowledged record exactly once in
per-key order (parents before children), and both interrupted batches hold
exactly the records their first attempt recorded as read.

Then what a user sees when the package was not shipped: the driver has it
(the zip on its ``PYTHONPATH``), the job is submitted without
``--py-files``, and the error names the executor and the ways to ship it,
instead of a bare ``No module named 'kinesis_src'`` in PySpark's worker.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cluster_checkpoints import (
    BatchEnds,
    committed,
    expected_records,
    in_flight,
    latest_batch,
    plan_of,
    recorded_ends,
    sink_batches,
    uncommitted,
)
from standalone_cluster import Submission, executor_pids
from waiting import wait_for

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.leases.progress_store import ProgressStore
from kinesis_src.testing import EXACTLY_ONCE, KeyedProducer, Resharder, verify_delivery

pytestmark = pytest.mark.integration

START_S = 240.0  # a driver's start on a loaded 2-core machine: JVM, executors, first batch
KEYS = 10
ROUND_EVERY_S = 0.2  # at most 50 records/s: batches keep coming while the test kills, the stream stays small


def executors(driver: Submission, app: str, *, active: bool = True) -> list[dict]:
    """The driver's executor summaries (the driver itself left out); all of them with ``active=False``."""
    rows = driver.api(f"applications/{app}/{'executors' if active else 'allexecutors'}") or []
    return [row for row in rows if row["id"] != "driver"]


def removed(driver: Submission, app: str, executor_id: str) -> dict | None:
    """The executor's summary once the driver has removed it (lost), else None."""
    rows = executors(driver, app, active=False)
    return next((row for row in rows if row["id"] == executor_id and not row["isActive"]), None)


def failed_on(driver: Submission, app: str, executor_id: str) -> int:
    """How many task attempts failed on the executor (the per-executor count stops when it is removed)."""
    stages = driver.api(f"applications/{app}/stages?details=true&taskStatus=FAILED") or []
    return sum(1 for stage in stages for task in (stage.get("tasks") or {}).values() if task["executorId"] == executor_id)


def produce(producer: KeyedProducer, stop: threading.Event, errors: list[BaseException]) -> None:
    """A round of keyed records every ROUND_EVERY_S until ``stop`` is set; a failed put ends it, kept in ``errors``."""
    try:
        while not stop.wait(ROUND_EVERY_S):
            producer.put_round()
    except Exception as exc:  # noqa: BLE001 - reported by the test after the join
        errors.append(exc)


def holds_within(condition: Callable[[], object], timeout_s: float) -> bool:
    """Whether ``condition`` becomes true within ``timeout_s``."""
    try:
        wait_for(condition, timeout_s, "condition")
    except AssertionError:
        return False
    return True


def kill_busy_executor(driver: Submission, app: str, checkpoint: Path, after: int) -> tuple[str, int]:
    """SIGKILL an executor JVM the driver shows running a task of an uncommitted batch after ``after``.

    Returns the executor's id and the Spark batch id.
    """

    def busy() -> tuple[str, int, int] | None:
        driver.check_running()
        batch_id = uncommitted(checkpoint)
        plan = plan_of(checkpoint, batch_id) if batch_id is not None and batch_id > after else None
        if plan is None or not plan.read:
            return None
        pids = executor_pids(app)
        for row in executors(driver, app):
            if row["activeTasks"] > 0 and row["id"] in pids:
                return row["id"], pids[row["id"]], batch_id
        return None

    executor_id, pid, batch_id = wait_for(busy, 120, "an executor running a task of an uncommitted batch", 0.01)
    os.kill(pid, signal.SIGKILL)
    return executor_id, batch_id


def snapshot_ends(checkpoint: Path, store: ProgressStore, batch_id: int) -> BatchEnds:
    """Batch ``batch_id``'s recorded ends, read before later commits purge them."""
    return wait_for(lambda: recorded_ends(checkpoint, store, batch_id), 120, f"batch {batch_id}'s recorded ends", 0.01)


def kill_executor_mid_task(
    driver: Submission, app: str, checkpoint: Path, store: ProgressStore, after: int
) -> tuple[str, BatchEnds]:
    """Kill executors until one dies with a task of its own failed, in a batch after ``after`` that read records.

    The API's view can be a moment old (the task just finished) and a batch
    may read nothing new, so a kill can miss; each further attempt waits for
    a later batch. Returns the executor's id and the interrupted batch's
    recorded ends, read as soon as the re-run task recorded them (later
    commits purge them).
    """
    for _ in range(4):
        executor_id, batch_id = kill_busy_executor(driver, app, checkpoint, after)
        ends = snapshot_ends(checkpoint, store, batch_id)
        wait_for(lambda: removed(driver, app, executor_id), 60, f"executor {executor_id} removed from the application")
        if ends.reads_records() and holds_within(lambda: failed_on(driver, app, executor_id) > 0, 10):
            return executor_id, ends
        after = batch_id
    raise AssertionError("four executors the driver showed running a task were killed between tasks or in empty batches")


def test_executor_and_driver_sigkill_on_a_standalone_cluster_exactly_once(
    kinesis: KinesisClient, stream_name: str, submit, tmp_path: Path
) -> None:
    began = time.monotonic()
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=KEYS)
    producer.put_rounds(20)
    app_name = f"cluster-{stream_name}"[:100]
    store = ProgressStore(DynamoDBClient(AwsSettings.from_env()), f"kinesis-src-{app_name}", app_name, stream_name)
    out = tmp_path / "out"
    checkpoint = out / "checkpoint"
    job = ("--stream", stream_name, "--out", str(out), "--application", app_name)

    driver = submit(*job)
    wait_for(lambda: driver.check_running() or committed(checkpoint) >= 1, START_S, "the first committed batch")
    app = wait_for(driver.app_id, 30, "the driver's application id")
    first_executors = {row["id"] for row in executors(driver, app)}

    resharder = Resharder(kinesis)
    stop, put_errors = threading.Event(), []
    producing = threading.Thread(target=produce, args=(producer, stop, put_errors), daemon=True)
    producing.start()
    try:
        split = resharder.split(stream_name, "shardId-000000000000")

        # (a) an executor dies mid-batch: its task fails and runs again elsewhere; the worker relaunches one
        killed, executor_ends = kill_executor_mid_task(driver, app, checkpoint, store, after=latest_batch(checkpoint))
        executor_batch = executor_ends.batch_id
        wait_for(lambda: driver.check_running() or committed(checkpoint) > executor_batch, 120,
                 f"batch {executor_batch} committed after executor {killed} was killed")
        wait_for(lambda: {r["id"] for r in executors(driver, app)} - first_executors, 120,
                 "a replacement executor registered")

        merge = resharder.merge(stream_name, split.children[1], "shardId-000000000001")

        # (b) the driver dies with a batch read but not committed
        caught = wait_for(lambda: driver.check_running() or in_flight(checkpoint, store, executor_batch), 120,
                          "a batch with recorded ends and no commit", 0.005)
        driver.sigkill()
    finally:
        stop.set()
        producing.join(timeout=120)
    assert not put_errors, f"the producer stopped: {put_errors[0]!r}"
    assert not (checkpoint / "commits" / str(caught.batch_id)).exists(), "killed too late: the batch committed"

    producer.put_rounds(5)  # after the merge: into the merged shard
    restarted = submit(*job, "--available-now")
    assert restarted.proc.wait(timeout=300) == 0, restarted.tail()

    batches = sink_batches(out / "data")
    verify_delivery([record for batch in batches for record in batch], producer, EXACTLY_ONCE)
    shards_read = {record.shard_id for batch in batches for record in batch}
    assert {*split.parents, *split.children, *merge.children} <= shards_read, shards_read
    for ends, what in ((executor_ends, f"executor {killed}"), (caught, "the driver")):
        wanted = expected_records(kinesis, stream_name, ends)
        got = {(r.shard_id, r.sequence_number) for r in batches[ends.batch_id]}
        assert wanted and got == wanted, f"batch {ends.batch_id} (interrupted by killing {what}) is not its first attempt"
    print(f"cluster test wall time {time.monotonic() - began:.0f} s, {len(batches)} batches, "
          f"{producer.acknowledged} records")


def test_a_job_without_py_files_fails_naming_the_executor_and_the_fix(
    kinesis: KinesisClient, stream_name: str, submit
) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    KeyedProducer(kinesis, stream_name, keys=2).put_rounds(1)

    run = submit("--stream", stream_name, "--batch", py_files=False)
    assert run.proc.wait(timeout=300) != 0, run.tail()
    log = run.log.read_text(errors="replace")
    assert "count " not in log, "the job read the stream without the package on its executors"
    errors = re.findall(r"ModuleNotFoundError: (.*)", log)
    assert errors, run.tail()
    ours = [e for e in errors if re.match(r"kinesis-src cannot be imported on Spark executor \d+ ", e)]
    assert ours, f"the executors' error does not name the executor: {errors[-1]}"
    assert all(fix in ours[-1] for fix in ("--py-files", "pip install kinesis-src", "docs/spark-cluster.md")), ours[-1]
