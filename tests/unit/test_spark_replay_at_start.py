"""A Spark batch that starts AT a sequence number replays exactly what its first attempt read (#23).

With failOnDataLoss=false, a shard whose checkpointed record was trimmed
resumes AT the oldest record left (:func:`kinesis_src.spark.retention.settle_partial_trims`):
the next batch's slice starts at ``AT_SEQUENCE_NUMBER X``, and X is the
first record it reads. A re-run of that batch that reaches a different end
replays to the recorded one; when that end is X itself, the replay must
still read X. An AT start has not read its record yet; an AFTER start has.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fake_kinesis import FakeKinesis
import pytest

# The 4.2+ stream reader (admission control, AvailableNow); PySpark 4.0/4.1 run the legacy reader
# (tests/unit/test_spark_compat.py) and `make oldest` runs this file on 4.0, where it skips.
pytest.importorskip("pyspark.sql.streaming.datasource", reason="needs PySpark 4.2+ (the 4.2 stream reader)")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_driver_fakes import stream_reader

from kinesis_src.positions import Position
from kinesis_src.retrieval.cursor import ReadEnd, ShardCursor, StopReason
from kinesis_src.spark import tasks
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.partitions import KinesisPartition
from kinesis_src.spark.planner import BatchEnd

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

TOP = 2**128 - 1
SHARD = "shardId-000000000000"
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"


def cursor_at(position: Position) -> ShardCursor:
    return ShardCursor("orders", SHARD, position)


def test_a_cursor_at_a_sequence_number_has_not_read_it_yet() -> None:
    end = ReadEnd.of("00005")
    assert cursor_at(Position.at_sequence("00005")).stopped_before_reading(end) is None
    assert cursor_at(Position.at_sequence("00004")).stopped_before_reading(end) is None
    assert cursor_at(Position.at_sequence("00006")).stopped_before_reading(end) is StopReason.END_SEQUENCE
    assert cursor_at(Position.after_sequence("00005")).stopped_before_reading(end) is StopReason.END_SEQUENCE


class FirstWriterWins:
    """The progress log of one batch: the first attempt's end per shard is the one every attempt gets."""

    def __init__(self) -> None:
        self.recorded: dict[str, BatchEnd] = {}

    def record_many(self, run: str, batch: int, ends: dict[str, BatchEnd]) -> dict[str, BatchEnd]:
        for sid, end in ends.items():
            self.recorded.setdefault(sid, end)
        return {sid: self.recorded[sid] for sid in ends}


def put(kinesis: FakeKinesis, *seqs: int) -> None:
    for q in seqs:
        kinesis.put_record("orders", f"k{q}", b"x", shard_id=SHARD, sequence_number=str(q), arrival=1.0)


def rows(partition: KinesisPartition) -> set[tuple[str, str, int]]:
    """One task attempt: the (shardId, sequenceNumber, subSequenceNumber) it hands Spark."""
    out = set()
    for batch in tasks.read_stream_partition(partition):
        cols = batch.to_pydict()
        out |= set(zip(cols["shardId"], cols["sequenceNumber"], cols["subSequenceNumber"]))
    return out


def test_a_rerun_of_a_batch_settled_at_the_oldest_record_left_yields_that_record_again(monkeypatch) -> None:
    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=[listing(0, 0, TOP, starting="1")], arn=ARN,
                          created=datetime(2026, 3, 1, tzinfo=UTC))
    put(kinesis, 9)  # the checkpoint is after 5; 6..8 expired while the query was down
    progress = FirstWriterWins()
    monkeypatch.setattr(tasks, "kinesis_client", lambda endpoint: kinesis)
    monkeypatch.setattr(tasks, "task_progress_log", lambda *args: progress)

    reader = stream_reader(kinesis, {}, initialPosition="trim_horizon", failOnDataLoss="false")
    committed = Plan(run="r", batch=3, shards={SHARD: ShardPlan(Position.after_sequence("5"), 0)})
    planned = Plan.from_offset(reader.latestOffset(committed.to_offset(), ReadAllAvailable()))
    assert planned.shards[SHARD].start == Position.at_sequence("9")  # settled at the oldest record left
    [partition] = reader.partitions(committed.to_offset(), planned.to_offset())

    first = rows(partition)
    assert first == {(SHARD, "9", 0)}
    put(kinesis, 10)  # the re-run reads further, then replays to the end the first attempt recorded
    assert rows(partition) == first
