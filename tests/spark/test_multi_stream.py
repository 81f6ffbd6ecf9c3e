"""Several streams in one query, and hashKeyRange slices, on a real SparkSession (kinesis-mock + DynamoDB Local)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.records import Record
from kinesis_src.testing import (
    KeyedProducer,
    check_order,
    decode,
    read_file_sink,
    split_then_merge,
)
from lineage import KeyRange, hash_key_of

try:
    from waiting import wait_for
except ImportError:  # tests/ made a package later
    from tests.waiting import wait_for

pytestmark = pytest.mark.integration

S = "shardId-{:012d}".format
HALF = 2**127  # where a 2-shard stream's shards meet, and where slice 1/2 starts


def sink_rows(path: Path) -> list[dict]:
    """Rows the file sink committed, in batch order, with their ``stream`` column (read_file_sink drops it).

    Follows the sink's own log (``_spark_metadata``): files of a batch never committed are not read.
    """
    import json

    import pyarrow.parquet as pq

    log_dir = path / "_spark_metadata"
    rows: list[dict] = []
    for batch in sorted(int(n.name) for n in log_dir.iterdir() if n.name.isdigit()):
        for line in (log_dir / str(batch)).read_text().splitlines()[1:]:  # first line: the log version
            entry = json.loads(line)
            if entry.get("action") == "add":
                rows.extend(pq.read_table(entry["path"].removeprefix("file://")).to_pylist())
    return rows


def committed(path: Path) -> int:
    try:
        return sum(len(batch) for batch in read_file_sink(str(path)))
    except FileNotFoundError:
        return 0


def records(rows) -> list[Record]:
    """Spark Rows or sink rows (dicts) as Records, in the given order."""
    rows = [r if isinstance(r, dict) else r.asDict() for r in rows]
    return [
        Record(r["partitionKey"], bytes(r["data"]), r["sequenceNumber"], r["subSequenceNumber"], r["shardId"],
               r["approximateArrivalTimestamp"])
        for r in rows
    ]


def start(spark, streams: str, out: Path):
    reader = spark.readStream.format("kinesis")
    options = {
        "streamName": streams, "initialPosition": "trim_horizon", "applicationName": f"multi-{out.name}",
        "idlePollIntervalMs": "200", "fetchIntervalMs": "0",
    }
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load().writeStream.format("parquet")
        .option("path", str(out / "data")).option("checkpointLocation", str(out / "cp"))
        .trigger(processingTime="500 milliseconds").start()
    )


def wait_committed(query, path: Path, count: int, what: str) -> None:
    def done() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        return committed(path) >= count

    wait_for(done, 180, what, poll_s=0.2)


def test_two_streams_resharded_independently_are_read_exactly_once_across_a_restart_adding_a_third(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "10000")
    split, merged, added = f"{stream_name}-s", f"{stream_name}-m", f"{stream_name}-a"
    for name, shards in ((split, 1), (merged, 2), (added, 1)):
        kinesis.create_stream(name, shards)
    producers = {name: KeyedProducer(kinesis, name, keys=10) for name in (split, merged, added)}
    for name in (split, merged, added):
        kinesis.wait_active(name)
        producers[name].put_rounds(2)
    data = tmp_path / "data"

    query = start(spark, f"{split},{merged}", tmp_path)
    try:
        wait_committed(query, data, 40, "the first records of both streams")
        background = threading.Thread(target=producers[merged].run_until_stopped, args=(200,), daemon=True)
        background.start()  # the merged stream gets records while both streams reshard
        kinesis.split_shard(split, S(0), HALF)
        kinesis.merge_shards(merged, S(0), S(1))
        kinesis.wait_active(split)
        kinesis.wait_active(merged)
        producers[split].put_rounds(3)
        producers[merged].stop()
        background.join(timeout=60)
        producers[merged].put_rounds(1)
        wait_committed(query, data, producers[split].acknowledged + producers[merged].acknowledged,
                       "every record of both streams")
    finally:
        query.stop()

    query = start(spark, f"{split},{merged},{added}", tmp_path)  # the same checkpoint, one stream more
    try:
        producers[split].put_rounds(1)
        producers[merged].put_rounds(1)
        total = sum(p.acknowledged for p in producers.values())
        wait_committed(query, data, total, "every record of the three streams after the restart")
    finally:
        query.stop()

    rows = sink_rows(data)
    assert {r["stream"] for r in rows} == {split, merged, added}
    for name, producer in producers.items():  # exactly once, and per-key order across the reshards
        report = check_order(records(r for r in rows if r["stream"] == name), producer.expected())
        assert report.ok, f"stream {name}:\n{report.summary()}"
    shards = {name: {r["shardId"] for r in rows if r["stream"] == name} for name in producers}
    assert shards[split] >= {S(0), S(1), S(2)} and shards[merged] >= {S(2)} and shards[added] == {S(0)}


def resharded(kinesis: KinesisClient, stream: str) -> KeyedProducer:
    """split_then_merge: 0 [0, 2**127) splits into 2 [0, 2**126) and 3 [2**126, 2**127); 3 + 1 merge into 4.

    Against slices 0/2 and 1/2: 0, 2 and 3 lie in slice 0, 1 in slice 1, 4 straddles both.
    """
    producer = KeyedProducer(kinesis, stream, keys=40)
    split_then_merge(kinesis, stream, producer, rounds=2)
    return producer


def read_slice(spark, streams: str, key_range: str) -> list:
    return (
        spark.read.format("kinesis").option("streamName", streams).option("hashKeyRange", key_range)
        .option("shardsPerTask", "2").load().collect()
    )


def overlapping(kinesis: KinesisClient, stream: str, key_range: KeyRange) -> set[str]:
    """The shards whose hash range (as the endpoint lists it) overlaps ``key_range``."""
    def span(shard: dict) -> KeyRange:
        bounds = shard["HashKeyRange"]
        return KeyRange(int(bounds["StartingHashKey"]), int(bounds["EndingHashKey"]))

    return {s["ShardId"] for s in kinesis.list_shards(stream) if key_range.overlaps(span(s))}


def test_a_slice_reads_only_the_shards_overlapping_it_on_every_stream(
    spark, kinesis: KinesisClient, stream_name: str
) -> None:
    other = f"{stream_name}-flat"
    resharded(kinesis, stream_name)
    kinesis.create_stream(other, 2)
    kinesis.wait_active(other)
    KeyedProducer(kinesis, other, keys=10).put_rounds(1)
    quarter, high = KeyRange(0, 2**126 - 1), KeyRange.slice(1, 2)
    rows = {
        f"0-{2**126 - 1}": read_slice(spark, f"{stream_name},{other}", f"0-{2**126 - 1}"),
        "1/2": read_slice(spark, f"{stream_name},{other}", "1/2"),
    }
    for (text, got), key_range in zip(rows.items(), (quarter, high)):
        for name in (stream_name, other):
            expected = overlapping(kinesis, name, key_range)
            read = {r.shardId for r in got if r.stream == name}
            assert read == expected, f"hashKeyRange {text} on {name}"
            assert expected < {s["ShardId"] for s in kinesis.list_shards(name)}, "the slice must leave a shard out"
    assert overlapping(kinesis, stream_name, quarter) == {S(0), S(2)}  # 3 and 4 start at 2**126: left out
    assert S(4) in overlapping(kinesis, stream_name, high)  # the merged shard straddles both halves


def test_slices_0_of_2_and_1_of_2_together_give_every_record_once_and_each_key_to_one_slice(
    spark, kinesis: KinesisClient, stream_name: str
) -> None:
    producer = resharded(kinesis, stream_name)
    slices = {i: read_slice(spark, stream_name, f"{i}/2") for i in (0, 1)}
    both = records([*slices[0], *slices[1]])
    report = check_order(both, producer.expected())
    assert report.ok and report.records == len(producer.expected()), report.summary()
    for i, rows in slices.items():
        own = KeyRange.slice(i, 2)
        assert all(hash_key_of(r.partitionKey) in own for r in rows), f"slice {i}/2 has keys of the other slice"
    keys = [{decode(bytes(r.data))[0] for r in rows} for rows in slices.values()]
    assert keys[0] and keys[1] and not keys[0] & keys[1]


def test_streams_given_by_arn_are_read_and_named_by_their_stream_name(
    spark, kinesis: KinesisClient, stream_name: str
) -> None:
    names = [f"{stream_name}-1", f"{stream_name}-2"]
    producers = {}
    for name in names:
        kinesis.create_stream(name, 1)
    for name in names:
        kinesis.wait_active(name)
        producers[name] = KeyedProducer(kinesis, name, keys=5)
        producers[name].put_rounds(2)
    arns = ",".join(kinesis.describe_stream(name).arn for name in names)
    rows = spark.read.format("kinesis").option("streamARN", arns).load().collect()
    for name, producer in producers.items():
        report = check_order(records(r for r in rows if r.stream == name), producer.expected())
        assert report.ok, f"stream {name}:\n{report.summary()}"
    assert {r.stream for r in rows} == set(names)
