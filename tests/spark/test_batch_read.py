"""spark.read.format("kinesis"): bounded reads across the lineage, option validation."""

from __future__ import annotations

from datetime import timedelta

import pyspark
import pytest

from kinesis_src import KinesisDataSource
from kinesis_src.spark import compat
from kinesis_src.testing import KeyedProducer, check_order, decode, split_then_merge

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
    if compat.minor_of(pyspark.__version__) >= (4, 1):  # 4.0 refuses to register a name pyspark_kinesis gave it
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


def big_pages(kinesis, stream_name: str, count: int = 400) -> list[tuple[str, bytes]]:
    """Records enough for GetRecords bodies of many records: unicode keys, empty data, every base64 padding."""
    import random

    rng = random.Random(12)
    entries = [(f"ключ-{i % 37}-🔑" if i % 3 else f"key-{i}", rng.randbytes(i % 301)) for i in range(count)]
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    for i in range(0, len(entries), 100):
        kinesis.put_records(stream_name, entries[i : i + 100])
    return entries


def rows_key(rows) -> list[tuple]:
    """Rows as sortable tuples; arrival times as naive UTC (Spark's rows are naive in the session's UTC)."""
    from datetime import UTC

    def naive(ts):
        return ts.astimezone(UTC).replace(tzinfo=None) if ts is not None and ts.tzinfo else ts

    return sorted((r["partitionKey"], bytes(r["data"]), r["sequenceNumber"], r["subSequenceNumber"],
                   naive(r["approximateArrivalTimestamp"])) for r in rows)


def test_a_task_decoding_into_arrow_gives_what_read_table_gives(spark, kinesis, stream_name) -> None:
    """Spark tasks (their own client, bodies read whole, pages to Arrow batches) and read_table (the
    Consumer's client) give the same rows, to the microsecond."""
    from kinesis_src import read_table

    entries = big_pages(kinesis, stream_name)
    rows = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    reference = read_table(stream_name, kinesis=kinesis, progress=False).to_pylist()
    assert len(rows) == len(entries)
    assert rows_key([r.asDict() for r in rows]) == rows_key(reference)
    assert sorted(bytes(r.data) for r in rows) == sorted(data for _, data in entries)


def test_a_hash_key_range_reads_only_its_slice(spark, kinesis, stream_name) -> None:
    """hashKeyRange: each slice's rows have hash keys inside it; the two halves are the whole stream."""
    from lineage import KeyRange, hash_key_of

    entries = big_pages(kinesis, stream_name, count=300)
    halves = {}
    for slice_ in ("0/2", "1/2"):
        rows = (spark.read.format("kinesis").option("streamName", stream_name).option("hashKeyRange", slice_)
                .load().collect())
        key_range = KeyRange.parse(slice_)
        assert rows and all(key_range.start <= hash_key_of(r.partitionKey) <= key_range.end for r in rows)
        halves[slice_] = rows_key([r.asDict() for r in rows])
    assert not set(halves["0/2"]) & set(halves["1/2"])
    assert sorted(halves["0/2"] + halves["1/2"]) == rows_key(
        [r.asDict() for r in spark.read.format("kinesis").option("streamName", stream_name).load().collect()]
    )
    assert len(halves["0/2"]) + len(halves["1/2"]) == len(entries)
