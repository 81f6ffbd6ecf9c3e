"""format("kinesis") from a Spark Connect client, on a server that has the package: by name, exactly once.

The client process only builds plans: the source runs on the server, with
the server's Python and environment. The streaming query goes through a
split and a merge while a producer writes; the batch read covers a
resharded stream; a client-side listener gets the source's figures.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from waiting import wait_for  # tests/waiting.py

from kinesis_src import KinesisDataSource
from kinesis_src.metrics import QueryProgressCollector, watch_queries
from kinesis_src.testing import KeyedProducer, Resharder, read_file_sink, verify_delivery

pytestmark = pytest.mark.integration


def start_file_query(spark: Any, stream: str, out: Path) -> Any:
    return (
        spark.readStream.format("kinesis").option("streamName", stream)
        .option("initialPosition", "trim_horizon").option("applicationName", f"connect-{stream}")
        .option("idlePollIntervalMs", "200").option("fetchIntervalMs", "0").load()
        .writeStream.queryName(f"connect_{stream.replace('-', '_')}").format("parquet")
        .option("path", str(out / "data")).option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="500 milliseconds").start()
    )


def sink_holds(query: Any, out: Path, count: int) -> bool:
    """The sink has at least ``count`` committed records; a failed query raises at once with its error."""
    error = query.exception()
    if error is not None:
        raise AssertionError(f"the streaming query failed: {error}")
    try:
        return sum(len(batch) for batch in read_file_sink(str(out / "data"))) >= count
    except FileNotFoundError:
        return False


def reshard_while_producing(producer: KeyedProducer, resharder: Resharder, stream: str) -> None:
    """Split a shard, then merge its upper child with its neighbour, each followed by records into the children."""
    worker = threading.Thread(target=producer.run_until_stopped, args=(400,), daemon=True)
    worker.start()
    try:
        for reshard in (lambda: resharder.split(stream), lambda: resharder.merge_neighbours(stream, index=1)):
            reshard()
            target = producer.acknowledged + 60
            wait_for(lambda: producer.acknowledged >= target, 60, "records into the new shards")
    finally:
        producer.stop()
        worker.join(timeout=60)


def scraped_records_read(registry: CollectorRegistry, query_name: str) -> float:
    prefix = f'kinesis_src_spark_shard_records_read{{query="{query_name}"'
    lines = generate_latest(registry).decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))


def remove_after_termination(spark: Any, listener: Any, registry: CollectorRegistry, query_name: str) -> None:
    """Remove the listener once the query's termination has reached it (the collector dropped its series).

    PySpark's Connect client (4.3.0 and before, SPARK-59623) joins the
    listener thread while holding the lock that thread needs to deliver an
    event: removing the last listener, or ``spark.stop()``, while an event is
    in flight hangs. After the termination event no other event comes.
    """
    wait_for(lambda: scraped_records_read(registry, query_name) == 0, 60,
             "the query's termination at the client's listener", poll_s=0.2)
    spark.streams.removeListener(listener)


def test_streaming_by_name_through_a_split_and_a_merge_exactly_once(
    connect_spark: Any, kinesis_stream_factory: Any, kinesis_resharder: Resharder, kinesis_keyed_producer: Any,
    tmp_path: Path,
) -> None:
    stream = kinesis_stream_factory(2)
    producer = kinesis_keyed_producer(stream, keys=20)
    producer.put_rounds(3)
    registry = CollectorRegistry()
    collector = QueryProgressCollector()
    registry.register(collector)
    listener = watch_queries(connect_spark, collector)  # a client-side StreamingQueryListener over Connect
    query = start_file_query(connect_spark, stream, tmp_path)
    try:
        wait_for(lambda: sink_holds(query, tmp_path, 60), 120, "the first records in the sink", poll_s=0.5)
        reshard_while_producing(producer, kinesis_resharder, stream)
        producer.put_rounds(2)
        wait_for(lambda: sink_holds(query, tmp_path, producer.acknowledged), 180, "every record in the sink",
                 poll_s=0.5)
        wait_for(lambda: scraped_records_read(registry, query.name) >= 60, 60,
                 "the source's figures through the client's listener", poll_s=0.5)
        progress = query.lastProgress
    finally:
        query.stop()
        remove_after_termination(connect_spark, listener, registry, query.name)

    records = [record for batch in read_file_sink(str(tmp_path / "data")) for record in batch]
    verify_delivery(records, producer)  # every record once, each key in order
    assert {record.shard_id for record in records} == {f"shardId-00000000000{i}" for i in range(5)}
    assert "millisBehindLatest" in progress["sources"][0]["latestOffset"]


def test_batch_read_by_name_of_a_resharded_stream_exactly_once(
    connect_spark: Any, kinesis_stream_factory: Any, kinesis_resharder: Resharder, kinesis_keyed_producer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = kinesis_stream_factory(1)
    producer = kinesis_keyed_producer(stream, keys=10)
    producer.put_rounds(2)
    kinesis_resharder.split(stream)
    producer.put_rounds(2)
    kinesis_resharder.merge_neighbours(stream)
    producer.put_rounds(2)
    # The client's environment never reaches the source: it reads with the server's endpoints.
    monkeypatch.setenv("KINESIS_SRC_ENDPOINT_URL", "http://127.0.0.1:9")
    rows = connect_spark.read.format("kinesis").option("streamName", stream).load().collect()
    verify_delivery(rows, producer)
    assert {row.shardId for row in rows} == {f"shardId-00000000000{i}" for i in range(4)}


def test_register_from_the_client_is_accepted_when_the_server_has_the_package(connect_spark: Any) -> None:
    """The class travels by reference: the server imports it from its own installation (no error, same columns)."""
    connect_spark.dataSource.register(KinesisDataSource)
    columns = connect_spark.read.format("kinesis").option("streamName", "s").load().columns
    assert columns[:2] == ["partitionKey", "data"]


def test_an_invalid_option_reaches_the_client_naming_the_option(connect_spark: Any) -> None:
    reader = connect_spark.read.format("kinesis").option("streamName", "s").option("shardsPerTask", "0")
    with pytest.raises(Exception) as info:
        reader.load().schema  # noqa: B018 - Connect plans lazily: the schema asks the server
    assert "'shardsPerTask' = 0 is out of range 1..10000" in str(info.value)
