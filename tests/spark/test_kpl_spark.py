"""KPL aggregates in the Spark source: batch and streaming reads through a split and a merge
(the workload: tests/kpl_producer.py)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from kpl_producer import aggregate, check_exactly_once_in_order, produce_through_split_and_merge

from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC

pytestmark = pytest.mark.integration


def as_rows(rows) -> list[tuple[bytes, str, int]]:
    return [(bytes(r.data), r.sequenceNumber, r.subSequenceNumber) for r in rows]


def test_batch_and_streaming_reads_deaggregate_exactly_once_in_order(spark, kinesis, stream_name, tmp_path: Path) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)
    batch = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    check_exactly_once_in_order(as_rows(batch), producer)

    # Small batches (4 user records per shard) end next to aggregates of 3: never inside one.
    seen: dict[int, list[tuple[bytes, str, int]]] = {}
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        rows = as_rows(df.select("data", "sequenceNumber", "subSequenceNumber", "shardId").collect())
        with lock:
            seen[batch_id] = rows

    query = (
        spark.readStream.format("kinesis").option("streamName", stream_name).option("initialPosition", "trim_horizon")
        .option("applicationName", f"kpl-{stream_name}").option("maxRecordsPerShard", "4")
        .option("fetchIntervalMs", "0").option("maxRecordsPerFetch", "2")
        .load().writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180), "AvailableNow query did not stop by itself"
    assert query.exception() is None
    streamed = [row for batch_id in sorted(seen) for row in seen[batch_id]]
    assert sorted(streamed) == sorted(as_rows(batch))
    for rows in seen.values():  # no batch ends inside an aggregate: every aggregate's sub-sequences are whole
        subs: dict[str, list[int]] = {}
        for _, seq, sub in rows:
            subs.setdefault(seq, []).append(sub)
        assert all(sorted(s) == list(range(len(s))) for s in subs.values())
        assert all(len(s) in (1, 3) for s in subs.values())


def test_strict_aggregation_fails_on_a_malformed_aggregate_naming_the_shard(spark, kinesis, stream_name) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    body = aggregate("k", [b"k:0", b"k:1"])[4:-16][:-2]
    bad = AGGREGATE_MAGIC + body + hashlib.md5(body).digest()
    kinesis.put_records(stream_name, [("k", bad), ("k", b"k:2")])
    lenient = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    assert [bytes(r.data) for r in lenient] == [bad, b"k:2"]
    strict = spark.read.format("kinesis").option("streamName", stream_name).option("strictAggregation", "true").load()
    with pytest.raises(Exception, match="MalformedAggregateError.*shardId-000000000000"):
        strict.collect()
