"""What the Spark source does on the running PySpark minor (docs/spark.md, "Supported Spark versions").

`make spark-matrix` runs this file, with the streaming and batch smoke tests,
on PySpark 4.0, 4.1 and 4.2; `make test` runs it on 4.3. PySpark 4.0 and 4.1
lack the admission-control and AvailableNow API of the Python streaming
source (``pyspark.sql.streaming.datasource``, 4.2+): these tests show what a
query gets there instead. Which API the runtime has is looked up here, apart
from the source's own detection, so a wrong detection fails the test.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.testing import KeyedProducer, check_order, read_file_sink, split_then_merge
from waiting import wait_for  # tests/waiting.py

pytestmark = pytest.mark.integration

PARENTS = {"shardId-000000000000", "shardId-000000000001"}  # split_then_merge's two first shards


def trigger_api() -> bool:
    """The running PySpark has ReadLimit / SupportsTriggerAvailableNow (4.2+)."""
    return importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None


def sink_count(path: Path) -> int:
    try:
        return sum(len(batch) for batch in read_file_sink(str(path)))
    except FileNotFoundError:
        return 0


def reader(spark, stream: str, **options: str):
    out = spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
    defaults = {"applicationName": f"vs-{stream}", "idlePollIntervalMs": "200", "fetchIntervalMs": "0"}
    for key, value in {**defaults, **options}.items():
        out = out.option(key, value)
    return out.load()


def to_parquet(df, out: Path):
    return (
        df.writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
    )


def test_max_records_per_trigger_caps_every_batch_through_a_reshard(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    """4.2+: Spark's admission control (ReadMaxRows); 4.0/4.1: the source applies the cap itself."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "10000")
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    split_then_merge(kinesis, stream_name, producer, rounds=2)
    df = reader(spark, stream_name, maxRecordsPerTrigger="13")
    query = to_parquet(df, tmp_path).trigger(processingTime="200 milliseconds").start()
    try:
        wait_for(lambda: query.exception() is not None or sink_count(tmp_path / "data") >= producer.acknowledged,
                 240, "every record in the sink")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    batches = read_file_sink(str(tmp_path / "data"))
    assert max(len(b) for b in batches) <= 13, [len(b) for b in batches]
    assert len(batches) >= producer.acknowledged // 13
    report = check_order([r for b in batches for r in b], producer.expected())
    assert report.ok, report.summary()


def test_available_now_reads_everything_in_one_start_or_one_batch_per_start_before_4_2(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    """4.2+: one AvailableNow start reads the whole lineage. 4.0/4.1 cannot tell the source the trigger:
    Spark falls back to one micro-batch per start, so each start reads one more parent-first batch and the
    starts together read everything exactly once."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "10000")
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    split_then_merge(kinesis, stream_name, producer, rounds=2)
    batches_after_start: list[int] = []  # the sink's batch count after each start, until every record is in
    while sink_count(tmp_path / "data") < producer.acknowledged:
        assert len(batches_after_start) < 12, f"AvailableNow starts never caught up: {batches_after_start}"
        query = to_parquet(reader(spark, stream_name, maxRecordsPerShard="7"), tmp_path).trigger(availableNow=True).start()
        assert query.awaitTermination(180), "AvailableNow query did not stop by itself"
        assert query.exception() is None, query.exception()
        batches_after_start.append(len(read_file_sink(str(tmp_path / "data"))))
    batches = read_file_sink(str(tmp_path / "data"))
    report = check_order([r for b in batches for r in b], producer.expected())
    assert report.ok, report.summary()
    if trigger_api():
        assert batches_after_start == [len(batches)] and len(batches) > 3  # one start read it all
    else:
        assert batches_after_start == list(range(1, len(batches) + 1)) and len(batches) > 3  # one batch per start
        assert {r.shard_id for r in batches[0]} <= PARENTS  # parent-first: children wait for a later start


def test_register_after_discovery_by_name_is_refused_only_by_spark_4_0(spark) -> None:
    """pyspark_kinesis makes ``format("kinesis")`` a source Spark finds by name; 4.0 will not register that name
    again (DATA_SOURCE_ALREADY_EXISTS), 4.1+ lets ``register`` replace it. Either way the name reads."""
    import pyspark

    from kinesis_src import KinesisDataSource
    from kinesis_src.spark.compat import minor_of

    if minor_of(pyspark.__version__) < (4, 1):
        with pytest.raises(Exception, match="DATA_SOURCE_ALREADY_EXISTS"):
            spark.dataSource.register(KinesisDataSource)
    else:
        spark.dataSource.register(KinesisDataSource)
    with pytest.raises(Exception, match="option 'streamName' is required"):
        spark.read.format("kinesis").load()
