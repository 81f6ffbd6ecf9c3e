"""The Spark source re-running an uncommitted batch after a restart whose start positions were trimmed.

On a restart Spark first re-runs the batch it planned but never committed:
``partitions(b-1, b)`` comes before any ``latestOffset``. Its tasks resume
AFTER_SEQUENCE_NUMBER X; when X expired while the query was down, Kinesis
reads from the oldest record left and the records in between are skipped
silently. The driver checks those start positions (the partial-trim probe
the restart check uses) before it hands out the partitions.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from fake_kinesis import FakeKinesis

# The 4.2+ stream reader (admission control, AvailableNow); PySpark 4.0/4.1 run the legacy reader
# (tests/unit/test_spark_compat.py) and `make oldest` runs this file on 4.0, where it skips.
pytest.importorskip("pyspark.sql.streaming.datasource", reason="needs PySpark 4.2+ (the 4.2 stream reader)")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_driver_fakes import RecordedEnds, stream_reader

from kinesis_src.errors import DataLossError
from kinesis_src.positions import Position, PositionKind
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import BatchEnd
from kinesis_src.spark.probes import IdleProber
from kinesis_src.spark.stream import KinesisStreamReader

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

TOP = 2**128 - 1
S = "shardId-{:012d}".format
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"


def shards(n: int) -> list[dict[str, Any]]:
    """``n`` open shards splitting the hash space evenly."""
    width = (TOP + 1) // n
    return [listing(i, i * width, TOP if i == n - 1 else (i + 1) * width - 1, starting=str(i + 1)) for i in range(n)]


def fake_stream(n: int, records: dict[str, list[int]]) -> FakeKinesis:
    """Stream "orders" of ``n`` shards; ``records[shard]`` is what each still holds (older ones were trimmed)."""
    fake = FakeKinesis()
    fake.create_stream("orders", listing=shards(n), arn=ARN, created=datetime(2026, 3, 1, tzinfo=UTC))
    for sid, seqs in records.items():
        for q in seqs:
            fake.put_record("orders", f"k{q}", b"x", shard_id=sid, sequence_number=str(q), arrival=1.0)
    return fake


def after(seq: int) -> Position:
    return Position.after_sequence(str(seq))


def plan(batch: int, read: dict[str, Position], carried: dict[str, Position] | None = None) -> Plan:
    planned = {s: ShardPlan(p, 10) for s, p in read.items()}
    planned.update({s: ShardPlan(p, 0) for s, p in (carried or {}).items()})
    return Plan(run="r", batch=batch, shards=planned)


def probes(kinesis: FakeKinesis) -> list[tuple[str, Position]]:
    """The AT_SEQUENCE_NUMBER iterators asked for: the partial-trim probes."""
    return [(c.shard_id, c.position) for c in kinesis.calls_to("get_shard_iterator")
            if c.position.kind is PositionKind.AT_SEQUENCE_NUMBER]


def restarted(records: list[int], progress: RecordedEnds | None = None,
              **options: str) -> tuple[KinesisStreamReader, FakeKinesis, Plan, Plan]:
    """A restart: batch 3 committed (shard 0 idle after 5), batch 4 (shard 0 from after 5) logged, not committed.

    The shard now holds ``records``; the reader is a fresh driver process.
    """
    kinesis = fake_stream(1, {S(0): records})
    reader = stream_reader(kinesis, (progress or RecordedEnds({})).by_batch, initialPosition="trim_horizon", **options)
    return reader, kinesis, plan(3, {}, {S(0): after(5)}), plan(4, {S(0): after(5)})


def test_the_replay_of_a_batch_whose_start_was_trimmed_fails_with_data_loss() -> None:
    reader, kinesis, committed, uncommitted = restarted([9, 10])  # 6..8 expired while the query was down
    with pytest.raises(DataLossError, match=rf"{S(0)}.*sequence number 5.*oldest.*9.*failOnDataLoss=false"):
        reader.partitions(committed.to_offset(), uncommitted.to_offset())
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]


def test_the_replay_of_a_trimmed_start_is_logged_and_counted_once_without_fail_on_data_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    progress = RecordedEnds({})
    reader, _, committed, uncommitted = restarted([9, 10], progress, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING):
        parts = reader.partitions(committed.to_offset(), uncommitted.to_offset())
    [piece] = [s for p in parts for s in p.slices]
    assert piece.shard_id == S(0)  # read on: Kinesis starts a read after a trimmed number at the oldest record
    warned = [r.getMessage() for r in caplog.records if "failOnDataLoss=false" in r.getMessage()]
    assert len(warned) == 1 and all(word in warned[0] for word in (S(0), "5", "9"))
    assert reader.reportLatestOffset()["dataLoss"] == {"trimmedShards": 0, "partlyTrimmedShards": 1}
    progress.by_batch[4] = {S(0): BatchEnd(after(10), 2, False, "caught_up", 0)}  # the replay read 9 and 10
    reader.latestOffset(uncommitted.to_offset(), ReadAllAvailable())
    assert reader.reportLatestOffset()["dataLoss"]["partlyTrimmedShards"] == 1  # the same gap, counted once


def test_the_replay_of_an_intact_start_costs_one_probe_per_shard_and_passes() -> None:
    reader, kinesis, committed, uncommitted = restarted([5, 6])
    parts = reader.partitions(committed.to_offset(), uncommitted.to_offset())
    assert [s.start_position for p in parts for s in p.slices] == [after(5)]
    reader.partitions(committed.to_offset(), uncommitted.to_offset())  # Spark asks again: no second probe
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]


def test_a_batch_this_driver_planned_is_not_probed_again_when_spark_asks_for_its_partitions() -> None:
    reader, kinesis, committed, _ = restarted([5, 6])
    planned = reader.latestOffset(committed.to_offset(), ReadAllAvailable())  # the restart check probes 5
    assert Plan.from_offset(planned).read == [S(0)]
    reader.partitions(committed.to_offset(), planned)
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]


def test_the_replay_checks_only_read_shards_resuming_after_a_sequence_number() -> None:
    kinesis = fake_stream(3, {S(0): [5, 6], S(1): [7, 8], S(2): [1]})
    reader = stream_reader(kinesis, {}, initialPosition="trim_horizon")
    committed = plan(3, {}, {S(0): after(5), S(1): after(7), S(2): Position.trim_horizon()})
    uncommitted = plan(4, {S(0): after(5), S(2): Position.trim_horizon()}, {S(1): after(7)})
    reader.partitions(committed.to_offset(), uncommitted.to_offset())
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]  # 1 is not read, 2 has no checkpointed record


def test_the_replay_checks_every_read_shard_however_slow_the_checks() -> None:
    """The tasks read once partitions() returns: no shard may wait for a later trigger, unlike latestOffset's checks."""
    n = 8
    kinesis = fake_stream(n, {S(i): [5, 6] if i else [9] for i in range(n)})
    reader = stream_reader(kinesis, {}, initialPosition="trim_horizon")
    ticks = iter(range(10**9))
    reader.driver.prober = IdleProber(kinesis, "orders", 1.0, workers=2, budget_s=0.25,
                                      clock=lambda: next(ticks) * 0.1, sleep=lambda s: None)
    starts = {S(i): after(5) for i in range(n)}
    with pytest.raises(DataLossError, match=rf"{S(0)}.*oldest.*9"):
        reader.partitions(plan(3, {}, starts).to_offset(), plan(4, starts).to_offset())
    assert sorted(probes(kinesis)) == [(S(i), Position.at_sequence("5")) for i in range(n)]
