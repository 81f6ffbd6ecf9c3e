"""spark.read.format("kinesis"): bounded reads across the lineage, option validation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kinesis_src import KinesisDataSource
from kinesis_src.workload import KeyedProducer, check_order, decode, split_then_merge

pytestmark = pytest.mark.integration


def records_of(rows):
    from kinesis_src.records import Record

    return [
        Record(r.partitionKey, bytes(r.data), r.sequenceNumber, r.subSequenceNumber, r.shardId, r.approximateArrivalTimestamp)
        for r in rows
    ]


def test_format_works_without_register_and_reads_between_timestamps(spark, kinesis, stream_name) -> None:
    """Runs first in this module: the session has no registered source yet (pyspark_kinesis is found)."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=5)
    producer.put_rounds(2)
    arrivals = [
        r.approximateArrivalTimestamp
        for r in spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    ]
    first_cut = max(arrivals)
    producer.put_rounds(2)
    every = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    second_cut = max(r.approximateArrivalTimestamp for r in every)
    producer.put_rounds(2)
    window = (
        spark.read.format("kinesis")
        .option("streamName", stream_name)
        .option("initialPosition", "at_timestamp")
        .option("startingTimestamp", (first_cut + timedelta(milliseconds=1)).isoformat())
        .option("endingTimestamp", second_cut.isoformat())
        .load()
        .collect()
    )
    got = sorted(decode(bytes(r.data)) for r in window)
    assert got == sorted((f"key-{k:03d}", n) for k in range(5) for n in (3, 4))


def test_batch_read_of_a_resharded_stream_is_complete_and_parent_first(spark, kinesis, stream_name) -> None:
    producer = KeyedProducer(kinesis, stream_name, keys=20)
    split_then_merge(kinesis, stream_name, producer, rounds=3)
    spark.dataSource.register(KinesisDataSource)
    df = spark.read.format("kinesis").option("streamName", stream_name).option("shardsPerTask", "2").load()
    assert df.columns == ["partitionKey", "data", "stream", "shardId", "sequenceNumber", "subSequenceNumber", "approximateArrivalTimestamp"]
    rows = df.collect()
    report = check_order(records_of(rows), producer.expected())
    assert report.ok, report.summary()
    assert {r.stream for r in rows} == {stream_name}
    assert len(report.shards) == 5


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "option 'streamName' is required"),
        ({"streamName": "s", "maxRecordsPerShard": "lots"}, "'maxRecordsPerShard' = 'lots' is not an integer"),
        ({"streamName": "s", "initialPosition": "beginning"}, "accepted values: latest, trim_horizon, earliest, at_timestamp"),
        ({"streamName": "s", "initialPosition": "at_timestamp"}, "needs option 'startingTimestamp'"),
        ({"streamName": "s", "initialPosition": "at_timestamp", "startingTimestamp": "noon"}, "startingTimestamp"),
        ({"streamName": "s", "maxRecordPerShard": "5"}, "unknown option(s) 'maxrecordpershard'"),
        ({"streamName": "s", "endpointUrl": "localhost:4566"}, "endpointUrl"),
        ({"streamName": "s", "preserveShardOrder": "yes"}, "'preserveShardOrder' = 'yes' must be true or false"),
    ],
)
def test_invalid_options_fail_at_load_naming_the_option(spark, options: dict, message: str) -> None:
    reader = spark.read.format("kinesis")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        reader.load().collect()
    assert message in str(info.value)


def test_missing_stream_is_named(spark, emulator_env) -> None:
    with pytest.raises(Exception) as info:
        spark.read.format("kinesis").option("streamName", "no-such-stream").load().collect()
    assert "stream 'no-such-stream' does not exist" in str(info.value)
