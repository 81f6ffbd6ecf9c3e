"""The life of one checkpoint: trigger changes and partial batches (issue #9).

* AvailableNow, then a processing-time trigger, then AvailableNow again, on
  the same checkpoint: each run reads what arrived since the last one.
* A foreachBatch that runs only some partitions (``df.take(1)``) leaves the
  shards of the other partitions unread: later batches read them, and the
  query keeps going.

Records are identified by ``(shardId, sequenceNumber)`` as PutRecords
acknowledged them, so every check is an exact set comparison.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from kinesis_src.aws import KinesisClient
from spark_versions import needs_trigger_api, until_drained  # tests/spark_versions.py
from waiting import wait_for  # tests/waiting.py

pytestmark = pytest.mark.integration

Key = tuple[str, str]  # (shardId, sequenceNumber)


def put(kinesis: KinesisClient, stream: str, count: int, tag: str) -> list[Key]:
    """``count`` records with distinct partition keys (spread over the shards); their acknowledged keys."""
    results = kinesis.put_records(stream, [(f"{tag}-{i}", f"{tag}:{i}".encode()) for i in range(count)])
    return [(r["ShardId"], r["SequenceNumber"]) for r in results]


class Seen:
    """What foreachBatch saw, per batch id: an idempotent sink, as foreachBatch needs.

    A query stopped between a batch's foreachBatch call and its commit re-runs that batch
    on restart (at least once); the re-run must be identical (deterministic replay), so it
    replaces the first delivery and is checked against it.
    """

    def __init__(self) -> None:
        self.batches: dict[int, list[Key]] = {}
        self.replays: list[tuple[int, bool]] = []  # (batch id, same rows as the first delivery)
        self._lock = threading.Lock()

    def add(self, batch_id: int, rows: list[Any]) -> None:
        keys = sorted((r.shardId, r.sequenceNumber) for r in rows)
        with self._lock:
            if batch_id in self.batches:
                self.replays.append((batch_id, self.batches[batch_id] == keys))
            self.batches[batch_id] = keys

    def collect_all(self, df, batch_id: int) -> None:
        self.add(batch_id, df.select("shardId", "sequenceNumber").collect())

    @property
    def rows(self) -> list[Key]:
        with self._lock:
            assert all(same for _, same in self.replays), f"a re-run batch differed: {self.replays}"
            return [key for batch in self.batches.values() for key in batch]

    def count(self) -> int:
        return len(self.rows)


def start(spark, stream: str, checkpoint: Path, handler: Callable, trigger: dict[str, Any], **options: str):
    reader = spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
    for key, value in {"applicationName": f"lc-{stream}", "idlePollIntervalMs": "200", "fetchIntervalMs": "0", **options}.items():
        reader = reader.option(key, value)
    return (
        reader.load().writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start()
    )


def until(query, condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    """Poll ``condition``; fail at once, with the query's error, if the query dies meanwhile."""

    def check() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        return condition()

    wait_for(check, timeout_s, what, poll_s=0.2)


def run_available_now(spark, stream: str, checkpoint: Path, seen: Seen) -> None:
    until_drained(lambda: start(spark, stream, checkpoint, seen.collect_all, {"availableNow": True}),
                  lambda: len(seen.batches), timeout_s=120)


def test_available_now_then_processing_time_then_available_now_reads_everything(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    seen, checkpoint = Seen(), tmp_path / "cp"
    written = put(kinesis, stream_name, 200, "before-available-now")
    run_available_now(spark, stream_name, checkpoint, seen)
    assert sorted(seen.rows) == sorted(written)

    written += put(kinesis, stream_name, 200, "before-processing-time")
    query = start(spark, stream_name, checkpoint, seen.collect_all, {"processingTime": "200 milliseconds"})
    try:
        until(query, lambda: seen.count() >= len(written), f"all {len(written)} records")
    finally:
        query.stop()
    assert sorted(seen.rows) == sorted(written)

    written += put(kinesis, stream_name, 20, "before-available-now-again")
    run_available_now(spark, stream_name, checkpoint, seen)
    assert sorted(seen.rows) == sorted(written)  # exactly once across the three runs


def test_a_batch_that_runs_only_some_partitions_does_not_stop_the_query(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    """First foreachBatch calls df.take(1): Spark runs the first partition only (one shard each)."""
    kinesis.create_stream(stream_name, 3)
    kinesis.wait_active(stream_name)
    first = put(kinesis, stream_name, 30, "first")
    assert len({shard for shard, _ in first}) == 3  # every partition of the first batch has rows
    seen, taken = Seen(), []

    def handler(df, batch_id: int) -> None:
        if not taken:
            taken.extend((r.shardId, r.sequenceNumber) for r in df.take(1))
        else:
            seen.collect_all(df, batch_id)

    query = start(spark, stream_name, tmp_path / "cp", handler, {"processingTime": "200 milliseconds"}, shardsPerTask="1")
    try:
        until(query, lambda: len(seen.batches) >= 1, "a batch after the partial one")
        second = put(kinesis, stream_name, 30, "second")
        consumed = {(s, q) for s, q in first if s == taken[0][0]}  # the shard take(1) ran: read, and dropped
        expected = sorted(set(first + second) - consumed)
        until(query, lambda: seen.count() >= len(expected), f"the {len(expected)} records not consumed by take(1)")
    finally:
        query.stop()
    assert taken[0] in consumed
    assert sorted(seen.rows) == expected  # the two shards take(1) never ran are read from where they were


@needs_trigger_api  # one AvailableNow start reading in capped batches; 4.0/4.1: test_version_support.py
def test_max_records_per_trigger_is_a_hard_cap_below_the_shard_count(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    kinesis.create_stream(stream_name, 4)
    kinesis.wait_active(stream_name)
    written = put(kinesis, stream_name, 12, "capped")
    sizes: list[int] = []
    seen = Seen()

    def handler(df, batch_id: int) -> None:
        seen.collect_all(df, batch_id)
        sizes.append(len(seen.batches[batch_id]))

    query = start(spark, stream_name, tmp_path / "cp", handler, {"availableNow": True}, maxRecordsPerTrigger="3")
    assert query.awaitTermination(120), "AvailableNow query did not stop by itself"
    assert query.exception() is None
    assert sorted(seen.rows) == sorted(written)
    assert max(sizes) <= 3 and len(sizes) >= 4, sizes  # 4 shards, yet never more than 3 rows a batch


def test_a_stopped_query_releases_its_claim_so_a_restart_need_not_wait_it_out(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    """Spark ends the driver-side reader's process with SIGTERM: stop() must still run and release
    the applicationName claim (before, the claim stayed until its heartbeat went stale)."""
    from kinesis_src.config import AwsSettings
    from kinesis_src.spark.progress_log import open_lease_table

    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    put(kinesis, stream_name, 5, "x")
    seen = Seen()
    query = start(spark, stream_name, tmp_path / "cp", seen.collect_all, {"processingTime": "200 milliseconds"})
    table = open_lease_table(AwsSettings.from_env(), f"kinesis-src-lc-{stream_name}", f"lc-{stream_name}", stream_name)
    try:
        until(query, lambda: seen.count() >= 5, "the 5 records")
        assert table.read_claim() is not None  # held while the query runs
    finally:
        query.stop()
    wait_for(lambda: table.read_claim() is None, 30, "the claim's release after query.stop()", poll_s=0.2)
