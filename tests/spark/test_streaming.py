"""spark.readStream.format("kinesis") end to end: live split and merge, Parquet sink, exactly once."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest
from spark_versions import needs_trigger_api  # tests/spark_versions.py

from kinesis_src.aws import KinesisClient
from kinesis_src.testing import (
    KeyedProducer,
    check_order,
    read_file_sink,
    split_then_merge,
)

pytestmark = pytest.mark.integration


def wait_for(condition, timeout_s: float, what: str, query=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


def sink_count(path: Path) -> int:
    try:
        return sum(len(batch) for batch in read_file_sink(str(path)))
    except FileNotFoundError:
        return 0


def start_query(spark, stream: str, out: Path, **options: str):
    reader = spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
    for key, value in {"applicationName": f"app-{stream}", "idlePollIntervalMs": "200", "fetchIntervalMs": "0", **options}.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def test_streaming_query_survives_split_and_merge_exactly_once(spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path) -> None:
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "10000")
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=20)
    producer.put_rounds(3)
    query = start_query(spark, stream_name, tmp_path)
    try:
        wait_for(lambda: sink_count(tmp_path / "data") >= 60, 120, "the first records in the sink", query)
        worker = threading.Thread(target=producer.run_until_stopped, args=(400,), daemon=True)
        worker.start()
        lo_hi = kinesis.list_shards(stream_name)[0]["HashKeyRange"]
        kinesis.split_shard(stream_name, "shardId-000000000000", (int(lo_hi["StartingHashKey"]) + int(lo_hi["EndingHashKey"])) // 2)
        kinesis.wait_active(stream_name)
        target = producer.acknowledged + 60
        wait_for(lambda: producer.acknowledged >= target, 60, "records into the split children")
        kinesis.merge_shards(stream_name, "shardId-000000000003", "shardId-000000000001")
        kinesis.wait_active(stream_name)
        target = producer.acknowledged + 60
        wait_for(lambda: producer.acknowledged >= target, 60, "records into the merged shard")
        producer.stop()
        worker.join(timeout=60)
        producer.put_rounds(2)
        wait_for(lambda: sink_count(tmp_path / "data") >= producer.acknowledged, 180, "every record in the sink", query)
        progress = query.lastProgress
    finally:
        query.stop()

    batches = read_file_sink(str(tmp_path / "data"))
    records = [r for batch in batches for r in batch]
    report = check_order(records, producer.expected())
    assert report.ok, report.summary()
    assert len(report.shards) == 5  # every shard of the lineage contributed
    # Parent-first across batches: no batch holds a child's record before the batch of its parent's last record.
    last_batch = {}
    first_batch = {}
    for index, batch in enumerate(batches):
        for r in batch:
            last_batch[r.shard_id] = index
            first_batch.setdefault(r.shard_id, index)
    assert first_batch["shardId-000000000002"] > last_batch["shardId-000000000000"]
    assert first_batch["shardId-000000000004"] > max(last_batch["shardId-000000000003"], last_batch["shardId-000000000001"])
    assert progress is not None
    if importlib.util.find_spec("pyspark.sql.streaming.datasource"):  # reportLatestOffset: PySpark 4.2+
        assert "millisBehindLatest" in str(progress["sources"][0].get("latestOffset"))


@needs_trigger_api  # one start drains the backlog from 4.2; before, test_version_support.py
def test_available_now_reads_everything_across_a_reshard_then_stops(spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path) -> None:
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    split_then_merge(kinesis, stream_name, producer, rounds=2)
    reader = (
        spark.readStream.format("kinesis").option("streamName", stream_name)
        .option("initialPosition", "trim_horizon").option("applicationName", f"an-{stream_name}")
        .option("maxRecordsPerShard", "7")  # several batches per shard: AvailableNow must loop, then stop
    )
    query = (
        reader.load().writeStream.format("parquet")
        .option("path", str(tmp_path / "data")).option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180), "AvailableNow query did not stop by itself"
    assert query.exception() is None
    batches = read_file_sink(str(tmp_path / "data"))
    report = check_order([r for b in batches for r in b], producer.expected())
    assert report.ok, report.summary()
    assert len(batches) > 3


def test_preserve_shard_order_false_reads_children_without_waiting(spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path) -> None:
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    split_then_merge(kinesis, stream_name, producer, rounds=2)
    query = (
        spark.readStream.format("kinesis").option("streamName", stream_name)
        .option("initialPosition", "trim_horizon").option("applicationName", f"po-{stream_name}")
        .option("preserveShardOrder", "false").load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "data")).option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180)
    batches = read_file_sink(str(tmp_path / "data"))
    first = {r.shard_id for r in batches[0]}
    assert first == {f"shardId-00000000000{i}" for i in range(5)}  # parents and children in one batch
    records = [r for b in batches for r in b]
    assert sorted((r.shard_id, r.sequence_number) for r in records) == sorted({(r.shard_id, r.sequence_number) for r in records})
    assert len(records) == producer.acknowledged


def test_streaming_rejects_bad_and_batch_only_options_before_reading(spark, tmp_path: Path) -> None:
    with pytest.raises(Exception) as info:
        spark.readStream.format("kinesis").option("streamName", "s").option("shardsPerTask", "0").load()
    assert "'shardsPerTask' = 0 is out of range 1..10000" in str(info.value)
    query = (
        spark.readStream.format("kinesis").option("streamName", "s").option("endingTimestamp", "2026-01-01T00:00:00Z")
        .load().writeStream.format("memory").queryName("rejected").option("checkpointLocation", str(tmp_path)).start()
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination(60)
    assert "apply to batch reads (spark.read) only" in str(info.value)
    assert query.lastProgress is None  # failed before its first batch


def test_a_second_query_with_the_same_application_name_fails_naming_the_option(spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    KeyedProducer(kinesis, stream_name, keys=3).put_rounds(2)
    first = start_query(spark, stream_name, tmp_path / "first", applicationName="shared-app")
    try:
        wait_for(lambda: first.lastProgress is not None, 120, "the first query's first batch", first)
        second = start_query(spark, stream_name, tmp_path / "second", applicationName="shared-app")
        with pytest.raises(Exception) as info:
            second.awaitTermination(120)
        assert "applicationName 'shared-app' is in use by another running query" in str(info.value)
        assert first.isActive and first.exception() is None
        other = start_query(spark, stream_name, tmp_path / "other", applicationName="other-app")
        wait_for(lambda: other.lastProgress is not None, 120, "a query with its own name", other)
        other.stop()
    finally:
        first.stop()
