"""SIGKILL the driver in the middle of a micro-batch; the restarted query re-runs it identically.

Invariant 2 (deterministic replay): the batch that was in flight when the
driver died is re-run from the checkpointed offset and yields exactly the
(shardId, sequenceNumber) set its first attempt recorded in the lease table,
and the whole output is still exactly once and per-key ordered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_versions import needs_trigger_api  # tests/spark_versions.py

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import LeaseTableNotFoundError
from kinesis_src.leases.progress_store import ProgressStore
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.spark.offsets import Plan
from kinesis_src.testing import KeyedProducer, check_order, read_file_sink

pytestmark = pytest.mark.integration

JOB = Path(__file__).with_name("stream_job.py")


def spark_offset(path: Path) -> dict:
    """The source's offset in a Spark offset-log file: version line, metadata line, then one line per source."""
    return json.loads(path.read_text().splitlines()[2])


def in_flight(checkpoint: Path, store: ProgressStore) -> tuple[Plan, dict] | None:
    """A batch whose offset is logged, not committed, and whose every shard already recorded its end."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not offsets.is_dir():
        return None
    for name in sorted((n for n in os.listdir(offsets) if n.isdigit()), key=int, reverse=True):
        if (commits / name).exists():
            return None
        try:
            plan = Plan.from_offset(spark_offset(offsets / name))
        except (IndexError, ValueError):
            return None  # being written
        if plan.batch < 2 or not plan.read:
            return None
        recorded = store.read_batch(plan.run, plan.batch)
        if set(recorded) == set(plan.read):
            return plan, recorded
        return None
    return None


def run_job(out: Path, stream: str, env: dict[str, str], *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(JOB), "--stream", stream, "--out", str(out), "--application", f"crash-{stream}", *extra],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=open(out / f"job{len(extra)}.log", "w"),
        start_new_session=True,
    )


@needs_trigger_api  # its restarted job drains with one AvailableNow start
def test_driver_killed_mid_batch_replays_it_identically(kinesis: KinesisClient, stream_name: str, emulator_env, tmp_path: Path) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=20)
    producer.put_rounds(150)  # 3000 records: many batches of at most 300 per shard
    store = ProgressStore(DynamoDBClient(AwsSettings.from_env()), f"kinesis-src-crash-{stream_name}", f"crash-{stream_name}", stream_name)

    job = run_job(tmp_path, stream_name, emulator_env, "--max-records-per-shard", "300")
    caught = None
    try:
        deadline = time.monotonic() + 240
        while caught is None:
            assert job.poll() is None, (tmp_path / "job2.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "never saw a batch with recorded ends and no commit"
            try:
                caught = in_flight(tmp_path / "checkpoint", store)
            except LeaseTableNotFoundError:  # the driver creates the table when it starts
                caught = None
            if caught is None:
                time.sleep(0.005)
        os.killpg(job.pid, signal.SIGKILL)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
    plan, recorded = caught
    assert not (tmp_path / "checkpoint" / "commits" / str(plan.batch)).exists(), "killed too late: batch committed"

    producer.put_rounds(5)
    restarted = run_job(tmp_path, stream_name, emulator_env, "--max-records-per-shard", "300", "--available-now")
    assert restarted.wait(timeout=300) == 0, (tmp_path / "job3.log").read_text()[-3000:]

    batches = read_file_sink(str(tmp_path / "data"))
    report = check_order([r for b in batches for r in b], producer.expected())
    assert report.ok, report.summary()

    # The re-run batch holds exactly what the killed attempt recorded: start .. recorded end, per shard.
    expected = set()
    for sid in plan.read:
        end = recorded[sid].end
        if end == plan.shards[sid].start:
            continue
        reader = ShardReader(kinesis, stream_name, sid, plan.shards[sid].start, fetch_interval_s=0)
        expected |= {(sid, r.sequence_number) for r in reader.read(end_sequence=end.sequence_number).records()}
    rerun = {(r.shard_id, r.sequence_number) for r in batches[plan.batch - 1]}
    assert expected and rerun == expected
