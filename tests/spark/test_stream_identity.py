"""A stream deleted and created again under the same name is another stream (issue #9 item 9).

Its shard ids start over (``shardId-000000000000``...), so the old checkpoint's
positions would name sequence numbers the new stream never issued. The offset
carries the stream identity (ARN + creation time): the restart fails with
StreamRecreatedError's message, which says to use a new checkpointLocation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.errors import StreamNotFoundError
from waiting import wait_for  # tests/waiting.py

pytestmark = pytest.mark.integration


def gone(kinesis: KinesisClient, stream: str) -> bool:
    try:
        kinesis.describe_stream(stream)
    except StreamNotFoundError:
        return True
    return False


def start(spark, stream: str, checkpoint: Path, rows: list):
    def collect(df, batch_id: int) -> None:
        rows.extend((r.shardId, r.sequenceNumber) for r in df.select("shardId", "sequenceNumber").collect())

    return (
        spark.readStream.format("kinesis").option("streamName", stream).option("initialPosition", "trim_horizon")
        .option("applicationName", f"id-{stream}").option("fetchIntervalMs", "0").load()
        .writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )


def test_a_recreated_stream_fails_the_restart_with_the_way_to_start_over(
    spark, kinesis: KinesisClient, stream_name: str, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    kinesis.create_stream(stream_name, 1)
    old = kinesis.wait_active(stream_name).identity
    written = [(r["ShardId"], r["SequenceNumber"]) for r in kinesis.put_records(stream_name, [(f"k{i}", b"old") for i in range(5)])]
    rows: list = []
    first = start(spark, stream_name, tmp_path / "cp", rows)
    assert first.awaitTermination(120), "AvailableNow query did not stop by itself"
    assert first.exception() is None and sorted(rows) == sorted(written)

    kinesis.delete_stream(stream_name)
    wait_for(lambda: gone(kinesis, stream_name), 30, f"stream {stream_name} deleted", poll_s=0.1)
    kinesis.create_stream(stream_name, 1)
    new = kinesis.wait_active(stream_name).identity
    assert old is not None and new is not None, "the emulator must report StreamCreationTimestamp"
    assert abs((new.created - old.created).total_seconds()) >= 1, (old, new)  # what tells the two apart
    kinesis.put_records(stream_name, [(f"k{i}", b"new") for i in range(5)])

    again: list = []
    restarted = start(spark, stream_name, tmp_path / "cp", again)
    with pytest.raises(StreamingQueryException) as info:
        restarted.awaitTermination(120)
    message = str(info.value)
    assert "StreamRecreatedError" in message and "deleted and created again" in message, message[:2000]
    assert "new checkpointLocation" in message, message[:2000]
    assert again == []  # nothing of the new stream was read under the old checkpoint
