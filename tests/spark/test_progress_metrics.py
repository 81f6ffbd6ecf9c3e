"""The query progress carries what the executor tasks' reads cost, per shard, and the collector exports it.

A real streaming query on kinesis-mock. The stream and its data come from the
testing kit (``kinesis_stream_factory``, ``kinesis_resharder``,
``kinesis_keyed_producer``); what each shard holds is read back with
``read_table``, so the expected bytes per shard are the data lengths Kinesis
has, not a number worked out beside the source.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_versions import needs_trigger_api  # tests/spark_versions.py
from prometheus_client import CollectorRegistry, generate_latest
from waiting import wait_for  # tests/waiting.py

from kinesis_src import read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.metrics import QueryProgressCollector
from kinesis_src.testing import KeyedProducer, Resharder, StreamFactory, verify_delivery

pytestmark = pytest.mark.integration

NO_DATA_PROGRESS = "spark.sql.streaming.noDataProgressEventInterval"


@pytest.fixture
def idle_progress_often(spark: Any) -> Iterator[None]:
    """Idle triggers report progress every 200 ms (default 10 s): the batch after the last data batch reports
    that batch's ends only in an idle trigger's progress."""
    saved = spark.conf.get(NO_DATA_PROGRESS, None)
    spark.conf.set(NO_DATA_PROGRESS, "200")
    try:
        yield
    finally:
        if saved is None:
            spark.conf.unset(NO_DATA_PROGRESS)
        else:
            spark.conf.set(NO_DATA_PROGRESS, saved)


def report_of(progress: dict[str, Any]) -> dict[str, Any]:
    return json.loads(progress["sources"][0]["latestOffset"])


def latest_report(query: Any) -> dict[str, Any] | None:
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    reports = [report_of(p) for p in query.recentProgress if p["sources"][0].get("latestOffset")]
    return reports[-1] if reports else None


def data_bytes_per_shard(kinesis: KinesisClient, stream: str) -> dict[str, int]:
    table = read_table(stream, kinesis=kinesis, progress=False)
    sums: Counter[str] = Counter()
    for shard, data in zip(table.column("shardId").to_pylist(), table.column("data").to_pylist()):
        sums[shard] += len(data)
    return dict(sums)


@needs_trigger_api  # the source's figures in lastProgress need PySpark 4.2+ (docs/spark.md)
def test_the_progress_reports_each_shards_bytes_throttles_and_retries_and_the_collector_exports_them(
    spark: Any,
    idle_progress_often: None,
    kinesis_test_client: KinesisClient,
    kinesis_stream_factory: StreamFactory,
    kinesis_resharder: Resharder,
    kinesis_keyed_producer: Callable[..., KeyedProducer],
    tmp_path: Path,
) -> None:
    stream = kinesis_stream_factory(shards=2)
    producer = kinesis_keyed_producer(stream, keys=12)
    producer.put_rounds(3)
    kinesis_resharder.split(stream, "shardId-000000000000")
    producer.put_rounds(3)
    expected_bytes = data_bytes_per_shard(kinesis_test_client, stream)
    assert len(expected_bytes) == 4 and sum(expected_bytes.values()) > 0  # the parent, its children and shard 1

    query = (
        spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
        .option("applicationName", f"metrics-{stream}"[:100]).option("idlePollIntervalMs", "200")
        .option("fetchIntervalMs", "0").option("maxRecordsPerShard", "20")  # several batches per shard
        .load().writeStream.format("memory").queryName("progress_metrics")
        .trigger(processingTime="300 milliseconds").start()
    )
    try:
        def all_counted() -> dict[str, Any] | None:
            report = latest_report(query)
            if report and sum(report.get("recordsRead", {}).values()) == producer.acknowledged:
                return report
            return None

        report = wait_for(all_counted, timeout_s=180, what="the progress to count every record", poll_s=0.2)
        rows = spark.sql("SELECT * FROM progress_metrics").collect()
        progress = query.lastProgress
    finally:
        query.stop()

    verify_delivery([row.asDict() for row in rows], producer, "at_least_once")  # every record reached the sink
    assert report["bytesRead"] == expected_bytes
    assert set(report["throttles"]) == set(report["retries"]) == set(expected_bytes)
    assert all(report["throttles"][s] <= report["retries"][s] for s in expected_bytes)

    collector = QueryProgressCollector()
    collector.update(progress)
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    for shard, nbytes in expected_bytes.items():
        labels = f'query="progress_metrics",shard="{shard}",source="0",stream="{stream}"'
        assert f"kinesis_src_spark_shard_bytes_read{{{labels}}} {float(nbytes)}" in text
        assert f"kinesis_src_spark_shard_retries{{{labels}}} {float(report['retries'][shard])}" in text
        assert f"kinesis_src_spark_shard_throttles{{{labels}}} {float(report['throttles'][shard])}" in text
