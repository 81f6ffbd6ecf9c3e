"""KPL de-aggregation in the Spark source: spark.read and a readStream query through a split and a
merge, a replayed micro-batch, and strictAggregation in a streaming query.

The workload (tests/kpl.py) mixes plain records and aggregates of 1 to 10
user records, some with explicit hash keys. Each row must be one user
record at its own (shardId, sequenceNumber, subSequenceNumber) with its own
partitionKey, exactly once, in per-key order. A micro-batch never ends
inside an aggregate, so maxRecordsPerShard is overshot by at most one
aggregate, and a re-run batch yields the same rows. Two queries per test at
most: SparkSession start and each query cost seconds.
tests/spark/test_kpl_spark.py has the one-key-per-aggregate cases and
strictAggregation in spark.read.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import pytest
from spark_versions import until_drained  # tests/spark_versions.py
from kpl import (
    aggregate,
    check_user_records,
    produce_through_split_and_merge,
    records_of_rows,
    with_bad_md5,
)

from kinesis_src import Record
from kinesis_src.aws import KinesisClient

pytestmark = pytest.mark.integration

MAX_RECORDS_PER_SHARD = 6  # below the largest aggregate of the mix (10 user records)


def stream_available_now(spark, stream: str, checkpoint: Path, attempts: dict[int, list[list[Record]]], **options: str):
    """Run an AvailableNow query to its end; every run of a batch id is appended to ``attempts``."""
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        rows = records_of_rows(df.collect())
        with lock:
            attempts[batch_id].append(rows)

    reader = spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
    for key, value in {"applicationName": f"kpl-{stream}", "fetchIntervalMs": "0", **options}.items():
        reader = reader.option(key, value)
    until_drained(
        lambda: reader.load().writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(),
        lambda: len(attempts), timeout_s=180,
    )


def sub_sequences(rows: list[Record]) -> dict[tuple[str, str], list[int]]:
    """(shardId, sequenceNumber) -> subSequenceNumbers, in row order (dicts keep first-seen order)."""
    out: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        out.setdefault((r.shard_id, r.sequence_number), []).append(r.sub_sequence_number)
    return out


def positions(rows: list[Record]) -> list[tuple[str, str, int, bytes]]:
    return sorted((r.shard_id, r.sequence_number, r.sub_sequence_number, r.data) for r in rows)


def test_batch_and_streaming_reads_put_each_user_record_at_its_position_and_replay_identically(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)
    producer.put_round(closing=True)  # the last micro-batch (the one replayed) ends with an aggregate

    batch = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    check_user_records(records_of_rows(batch), producer, hash_keys=False)

    attempts: dict[int, list[list[Record]]] = defaultdict(list)
    checkpoint = tmp_path / "checkpoint"
    stream_available_now(spark, stream_name, checkpoint, attempts, maxRecordsPerShard=str(MAX_RECORDS_PER_SHARD))
    batches = {batch_id: runs[0] for batch_id, runs in attempts.items()}
    assert all(len(runs) == 1 for runs in attempts.values())
    check_user_records([r for batch_id in sorted(batches) for r in batches[batch_id]], producer, hash_keys=False)

    # No batch ends inside an aggregate: each Kinesis record in a batch comes with all its user records.
    sizes = {e.sequence_number: e.aggregate_size for e in producer.expected.values()}
    for batch_id, rows in batches.items():
        for (shard_id, sequence), subs in sub_sequences(rows).items():
            assert subs == list(range(sizes[sequence])), f"batch {batch_id} cut the aggregate {sequence} of {shard_id}: {subs}"

    # Replay: the restarted query re-runs the last batch with rows, identically, when the checkpoint
    # says it was planned but never committed (as after a driver crash). An AvailableNow run can end
    # with an empty batch: forget those (nothing was written since, so nothing can differ there).
    last = max(b for b, rows in batches.items() if rows)
    assert any(r.sub_sequence_number > 0 for r in batches[last]), "the batch to replay holds no aggregate"
    for batch_id in batches:
        logs = ("offsets", "commits") if batch_id > last else ("commits",) if batch_id == last else ()
        for log in logs:
            for name in (str(batch_id), f".{batch_id}.crc"):
                (checkpoint / log / name).unlink(missing_ok=True)
    stream_available_now(spark, stream_name, checkpoint, attempts, maxRecordsPerShard=str(MAX_RECORDS_PER_SHARD))
    assert {b: len(runs) for b, runs in attempts.items() if b <= last and len(runs) > 1} == {last: 2}
    later = [r for b, runs in attempts.items() if b > last for rows in runs for r in rows]
    assert not later, f"nothing was written since, yet the restarted query read {len(later)} more rows"
    assert positions(attempts[last][1]) == positions(attempts[last][0])


def test_strict_aggregation_fails_a_streaming_query_naming_the_shard_and_lenient_passes_it_through(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    good = aggregate([("k", None, b"k:1"), ("k", None, b"k:2")])
    bad = with_bad_md5(aggregate([("k", None, b"k:3"), ("k", None, b"k:4")]))
    seqs = [kinesis.put_records(stream_name, [("k", blob)])[0]["SequenceNumber"] for blob in (good, bad, b"k:5")]

    lenient = spark.read.format("kinesis").option("streamName", stream_name).load().collect()
    assert [(bytes(r.data), r.sequenceNumber, r.subSequenceNumber) for r in lenient] == [
        (b"k:1", seqs[0], 0), (b"k:2", seqs[0], 1), (bad, seqs[1], 0), (b"k:5", seqs[2], 0)
    ]

    query = (
        spark.readStream.format("kinesis").option("streamName", stream_name).option("initialPosition", "trim_horizon")
        .option("applicationName", f"kpl-strict-{stream_name}").option("strictAggregation", "true")
        .load().writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    with pytest.raises(Exception) as failed:
        query.awaitTermination(180)
    message = str(failed.value)
    assert "MalformedAggregateError" in message and "shardId-000000000000" in message and seqs[1] in message, message


def test_max_records_per_shard_is_overshot_by_at_most_one_aggregate(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    """Four aggregates of 5 user records, then a plain one, limit 6: a batch takes one aggregate,
    and a second only because the first left it under the limit (5 < 6): at most 10 rows."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    data = [f"k:{n}".encode() for n in range(1, 22)]
    for i in range(4):
        kinesis.put_records(stream_name, [("k", aggregate([("k", None, d) for d in data[5 * i : 5 * i + 5]]))])
    kinesis.put_records(stream_name, [("k", data[20])])

    attempts: dict[int, list[list[Record]]] = defaultdict(list)
    stream_available_now(spark, stream_name, tmp_path / "checkpoint", attempts, maxRecordsPerShard=str(MAX_RECORDS_PER_SHARD))
    batches = [attempts[b][0] for b in sorted(attempts)]
    assert [r.data for rows in batches for r in rows] == data  # exactly once, in order (holds today)
    for batch_id, rows in enumerate(batches):
        records = list(sub_sequences(rows).values())
        before_last = sum(map(len, records[:-1]))
        assert before_last < MAX_RECORDS_PER_SHARD, (
            f"batch {batch_id} has {len(rows)} rows in {len(records)} Kinesis records: it went on reading after "
            f"{before_last} >= maxRecordsPerShard={MAX_RECORDS_PER_SHARD} user records"
        )
