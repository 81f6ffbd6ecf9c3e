"""The Spark source against retention and stream lifecycle (issue #9 items 8 and 9), with fake clients.

* A shard trimmed while the query runs (no longer listed) fails the query with
  DataLossError, or with failOnDataLoss=false is counted, dropped as drained and
  its children are read. A task whose shard vanished after planning does the same.
* A shard partly trimmed past its checkpointed position (the record after which
  we resume expired) is found by a GetShardIterator(AT_SEQUENCE_NUMBER) +
  GetRecords(Limit=1) probe: after a restart, and when a shard lags close to
  the retention period.
* Offsets carry the stream identity (ARN + creation time); a recreated or
  renamed stream fails with StreamRecreatedError instead of reading old positions.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fake_kinesis import FakeKinesis

# The 4.2+ stream reader (admission control, AvailableNow); PySpark 4.0/4.1 run the legacy reader
# (tests/unit/test_spark_compat.py) and `make oldest` runs this file on 4.0, where it skips.
pytest.importorskip("pyspark.sql.streaming.datasource", reason="needs PySpark 4.2+ (the 4.2 stream reader)")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_driver_fakes import RecordedEnds, stream_reader

from kinesis_src.errors import DataLossError, StreamRecreatedError
from kinesis_src.positions import Position, PositionKind
from kinesis_src.spark import driver as driver_module
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import BatchEnd, Frontier, ShardStatus
from kinesis_src.spark.retention import drop_trimmed
from kinesis_src.spark.stream import KinesisStreamReader

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing as model_listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing as model_listing

TOP = 2**128 - 1
HALF = TOP // 2
S = "shardId-{:012d}".format
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
CREATED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR_MS = 3_600_000


def listing(n: int, lo: int, hi: int, parents: tuple[int, ...] = (), closed: bool = False) -> dict:
    """lineage_model's listing with sequence numbers n+1 (start) and n+2 (end, when closed)."""
    return model_listing(n, lo, hi, parents, ending=str(n + 2) if closed else None, starting=str(n + 1))


MERGE = [listing(0, 0, HALF, closed=True), listing(1, HALF + 1, TOP, closed=True), listing(2, 0, TOP, (0, 1))]


def fake_stream(shards: list[dict], records: dict[str, list[int]] | None = None, **summary: Any) -> FakeKinesis:
    """Stream "orders" on the shared fake, listing ``shards``; ``records[shard]`` is what the shard still
    holds (older records were trimmed): an iterator at or after a trimmed sequence number starts at
    the oldest record left. ``summary`` overrides the stream's arn / created / retention_hours."""
    fake = FakeKinesis()
    fake.create_stream("orders", listing=shards, **{"arn": ARN, "created": CREATED, **summary})
    for sid, seqs in (records or {}).items():
        for q in seqs:
            fake.put_record("orders", f"k{q}", b"x", shard_id=sid, sequence_number=str(q), arrival=1.0)
    return fake


def probes(kinesis: FakeKinesis) -> list[tuple[str, Position]]:
    """The AT_SEQUENCE_NUMBER iterators asked for: the partial-trim probes."""
    return [(c.shard_id, c.position) for c in kinesis.calls_to("get_shard_iterator")
            if c.position.kind is PositionKind.AT_SEQUENCE_NUMBER]


def reader_for(kinesis: FakeKinesis, progress: RecordedEnds | None = None, **options: str) -> KinesisStreamReader:
    """A stream reader from trim_horizon; ``progress`` (the recorded ends) stays the driver's, for the test to add to."""
    return stream_reader(kinesis, (progress or RecordedEnds({})).by_batch, initialPosition="trim_horizon", **options)


def after(seq: int) -> Position:
    return Position.after_sequence(str(seq))


def ended(seq: int, stop: str = "record_limit", lag: int | None = 0, shard_end: bool = False) -> BatchEnd:
    return BatchEnd(after(seq), 1, shard_end, stop, lag)


def plan(batch: int, read: dict[str, Position], carried: dict[str, Position] | None = None, **kw: Any) -> Plan:
    shards = {s: ShardPlan(p, 10) for s, p in read.items()}
    shards.update({s: ShardPlan(p, 0) for s, p in (carried or {}).items()})
    return Plan(run="r", batch=batch, shards=shards, **kw)


def latest(reader: KinesisStreamReader, start: Plan | dict) -> Plan:
    offset = start.to_offset() if isinstance(start, Plan) else start
    return Plan.from_offset(reader.latestOffset(offset, ReadAllAvailable()))


# -- 8a. a shard trimmed whole (no longer listed) ----------------------------------------------------


def test_the_planner_drops_an_unlisted_shard_older_than_the_listing_and_keeps_a_listing_lag() -> None:
    frontier = Frontier(
        {S(1): after(7), S(5): Position.trim_horizon()},
        {S(1): ShardStatus.IDLE, S(5): ShardStatus.PENDING},
        frozenset({S(0)}),
    )
    listed = {S(2), S(3)}  # 1 is older than 3 and gone: trimmed; 5 is newer than anything listed: lag
    with pytest.raises(DataLossError, match=rf"{S(1)}.*AFTER_SEQUENCE_NUMBER 7.*failOnDataLoss=false") as info:
        drop_trimmed(frontier, listed, fail_on_data_loss=True, stream="orders")
    assert S(5) not in str(info.value)
    kept, trimmed = drop_trimmed(frontier, listed, fail_on_data_loss=False, stream="orders")
    assert trimmed == [S(1)]
    assert kept.positions == {S(5): Position.trim_horizon()} and S(1) not in kept.status
    assert kept.drained == {S(0), S(1)}  # drained: its children become ready
    assert drop_trimmed(frontier, set(), fail_on_data_loss=True, stream="orders") == (frontier, [])


def running_past_merge(monkeypatch: pytest.MonkeyPatch, **options: str) -> tuple[KinesisStreamReader, FakeKinesis, Plan]:
    """0 and 1 merged into 2; 0 is drained, 1 is read up to 7. Then 1 is trimmed while the query runs."""
    monkeypatch.setattr(driver_module, "DISCOVERY_INTERVAL_S", 0.0)  # list on every call
    kinesis = fake_stream(MERGE, {S(1): [7, 8, 9], S(2): [20]})
    p1 = plan(1, {S(1): Position.trim_horizon()}, drained=frozenset({S(0)}))
    progress = RecordedEnds({1: {S(1): ended(7)}, 2: {S(1): ended(7, "caught_up")}})
    reader = reader_for(kinesis, progress, **options)
    p2 = latest(reader, p1)  # the first listing still has shard 1
    assert p2.batch == 2 and p2.read == [S(1)] and p2.shards[S(1)].start == after(7)
    kinesis.drop_shard("orders", S(0))  # 0 and 1 trimmed
    kinesis.drop_shard("orders", S(1))
    return reader, kinesis, p2


def test_a_shard_trimmed_during_the_run_fails_with_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    reader, _, p2 = running_past_merge(monkeypatch)
    reader.driver.progress.by_batch[2] = {S(1): ended(7)}  # still unread records behind 7 (record_limit)
    with pytest.raises(DataLossError, match=rf"{S(1)} \(unread from AFTER_SEQUENCE_NUMBER 7\)"):
        latest(reader, p2)


def test_a_shard_trimmed_during_the_run_is_skipped_and_counted_without_fail_on_data_loss(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader, _, p2 = running_past_merge(monkeypatch, failOnDataLoss="false")
    reader.driver.progress.by_batch[2] = {S(1): ended(7)}
    with caplog.at_level(logging.WARNING):
        p3 = latest(reader, p2)
    assert p3.batch == 3 and p3.read == [S(2)] and p3.shards[S(2)].start == Position.trim_horizon()
    assert S(1) not in p3.shards
    assert any(S(1) in r.getMessage() and "failOnDataLoss=false" in r.getMessage() for r in caplog.records)
    assert reader.reportLatestOffset()["dataLoss"] == {"trimmedShards": 1, "partlyTrimmedShards": 0}
    latest(reader, p2)  # Spark asks again for the same start: the same shard is not counted twice
    assert reader.reportLatestOffset()["dataLoss"]["trimmedShards"] == 1


# -- 8a'. a shard that vanished between planning and reading (executor side) -------------------------


def task_partition(fail_on_data_loss: bool):
    """Batch 4 reads shard 1 from after sequence number 7."""
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice

    return KinesisPartition(
        index=0, stream="orders", endpoint=Endpoint("us-east-1", None, None),
        slices=(ShardSlice(S(1), after(7).to_dict(), 10),), fetch_interval_ms=0,
        progress={"table": "t", "application": "a", "run": "r", "batch": "4"},
        fail_on_data_loss=fail_on_data_loss,
    )


class RecordingProgressLog:
    def __init__(self) -> None:
        self.recorded: dict[str, BatchEnd] = {}

    def record_many(self, run: str, batch: int, ends: dict[str, BatchEnd]) -> dict[str, BatchEnd]:
        self.recorded.update(ends)
        return dict(ends)


def vanished_task(monkeypatch: pytest.MonkeyPatch) -> RecordingProgressLog:
    from kinesis_src.spark import tasks

    kinesis = fake_stream([listing(2, 0, TOP)], {S(2): [1]})  # shard 1 is gone
    log_ = RecordingProgressLog()
    monkeypatch.setattr(tasks, "kinesis_client", lambda endpoint: kinesis)
    monkeypatch.setattr(tasks, "task_progress_log", lambda *a: log_)
    return log_


def test_a_task_whose_shard_vanished_records_it_ended_without_fail_on_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinesis_src.spark.tasks import read_stream_partition

    recorded = vanished_task(monkeypatch)
    assert list(read_stream_partition(task_partition(fail_on_data_loss=False))) == []
    end = recorded.recorded[S(1)]
    assert end.shard_end and end.record_count == 0 and end.next_position == after(7)


def test_a_task_whose_shard_vanished_fails_with_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinesis_src.spark.tasks import read_stream_partition

    recorded = vanished_task(monkeypatch)
    with pytest.raises(DataLossError, match=rf"{S(1)}.*AFTER_SEQUENCE_NUMBER 7.*failOnDataLoss=false"):
        list(read_stream_partition(task_partition(fail_on_data_loss=True)))
    assert recorded.recorded == {}  # nothing recorded: a retry of the task fails the same way


def test_partitions_carry_fail_on_data_loss() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): [1]})
    reader = reader_for(kinesis, failOnDataLoss="false")
    p1 = plan(1, {S(0): Position.trim_horizon()})
    parts = reader.partitions(plan(0, {}, {S(0): Position.trim_horizon()}).to_offset(), p1.to_offset())
    assert [p.fail_on_data_loss for p in parts] == [False]
    assert [p.fail_on_data_loss for p in reader_for(kinesis).partitions({}, p1.to_offset())] == [True]


# -- 8b. a shard partly trimmed past its checkpointed position ---------------------------------------


def restarted_on(records: list[int], **options: str) -> tuple[KinesisStreamReader, FakeKinesis, Plan]:
    """A restart: the checkpoint has shard 0 idle after sequence number 5; the shard now holds ``records``."""
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): records})
    previous = plan(3, {}, {S(0): after(5)})
    return reader_for(kinesis, **options), kinesis, previous


def test_after_a_restart_a_position_whose_record_was_trimmed_fails_with_data_loss() -> None:
    reader, kinesis, previous = restarted_on([9, 10])  # 6..8 expired while the query was down
    with pytest.raises(DataLossError, match=rf"{S(0)}.*sequence number 5.*oldest.*9.*failOnDataLoss=false"):
        latest(reader, previous)
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]


def test_after_a_restart_a_partly_trimmed_shard_continues_from_the_oldest_record_and_is_counted() -> None:
    reader, _, previous = restarted_on([9, 10], failOnDataLoss="false")
    nxt = latest(reader, previous)
    assert nxt.read == [S(0)] and nxt.shards[S(0)].start == Position.at_sequence("9")
    assert reader.reportLatestOffset()["dataLoss"] == {"trimmedShards": 0, "partlyTrimmedShards": 1}


def test_after_a_restart_an_intact_position_costs_one_probe_and_passes() -> None:
    reader, kinesis, previous = restarted_on([5, 6])
    nxt = latest(reader, previous)
    assert probes(kinesis) == [(S(0), Position.at_sequence("5"))]
    assert nxt.read == [S(0)] and nxt.shards[S(0)].start == after(5)
    latest(reader, previous)
    assert len(probes(kinesis)) == 1  # once per restart, not per batch


def test_a_shard_lagging_close_to_retention_is_probed_and_others_are_not() -> None:
    kinesis = fake_stream([listing(0, 0, HALF), listing(1, HALF + 1, TOP)], {S(0): [12, 13], S(1): [11, 12]})
    lagging = 23 * HOUR_MS + 1  # retention 24 h: less than an hour left before shard 0's next record expires
    progress = RecordedEnds({1: {S(0): ended(10, lag=lagging), S(1): ended(10, lag=HOUR_MS)}})
    reader = reader_for(kinesis, progress)
    reader.initialOffset()  # a fresh start in this driver: no restart probe
    p1 = plan(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon()})
    with pytest.raises(DataLossError, match=rf"{S(0)}.*sequence number 10.*oldest.*12"):
        latest(reader, p1)
    assert probes(kinesis) == [(S(0), Position.at_sequence("10"))]  # shard 1 is far from retention


# -- 9. the stream identity in the offset ------------------------------------------------------------


def test_the_initial_offset_carries_the_stream_identity_as_its_last_key() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)])
    offset = reader_for(kinesis).initialOffset()
    assert list(offset)[-1] == "stream"
    assert offset["stream"] == {"arn": ARN, "created": "2026-03-01T12:00:00.000000Z"}
    back = Plan.from_offset(json.loads(json.dumps(offset)))
    assert back.to_offset() == offset and back.stream is not None and back.stream.arn == ARN


def test_every_plan_carries_the_identity_and_an_old_offset_adopts_the_current_one() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): [1, 2]})
    old = plan(0, {}, {S(0): Position.trim_horizon()}).to_offset()
    del old["stream"]  # written before offsets carried the identity
    nxt = latest(reader_for(kinesis), old)
    assert nxt.batch == 1 and nxt.stream is not None and nxt.stream.to_dict()["arn"] == ARN
    again = latest(reader_for(kinesis, RecordedEnds({1: {S(0): ended(1)}})), nxt)
    assert again.batch == 2 and again.stream == nxt.stream


def test_a_recreated_stream_fails_with_the_way_to_start_over() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): [1, 2]})
    offset = reader_for(kinesis).initialOffset()
    kinesis.stream("orders").created = CREATED + timedelta(hours=2)  # deleted and created again, same name
    reader = reader_for(kinesis)
    with pytest.raises(StreamRecreatedError, match="deleted and created again") as info:
        latest(reader, offset)
    assert "checkpointLocation" in str(info.value) and "applicationName" in str(info.value)
    assert not kinesis.count("get_shard_iterator") + kinesis.count("get_records")  # no old position was used
    with pytest.raises(StreamRecreatedError):
        reader.partitions(offset, {**offset, "batch": 1})  # a replayed batch after a restart is refused too


def test_a_changed_stream_name_on_the_same_checkpoint_fails() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): [1]})
    offset = reader_for(kinesis).initialOffset()
    kinesis.stream("orders").arn = ARN.replace("orders", "payments")
    with pytest.raises(StreamRecreatedError, match="streamName changed"):
        latest(reader_for(kinesis), offset)


def test_the_stream_is_described_once_per_driver() -> None:
    kinesis = fake_stream([listing(0, 0, TOP)], {S(0): [1]})
    reader = reader_for(kinesis)
    offset = reader.initialOffset()
    for _ in range(3):
        reader.latestOffset(offset, ReadAllAvailable())
    assert [c.stream for c in kinesis.calls_to("describe_stream")] == ["orders"]


def test_after_a_restart_every_position_is_checked_at_the_same_time() -> None:
    """Two calls per shard: 1,000 shards one after another would take a minute at 20 ms per call."""
    import threading

    n = 6
    width = (TOP + 1) // n
    kinesis = fake_stream(
        [listing(i, i * width, TOP if i == n - 1 else (i + 1) * width - 1) for i in range(n)],
        {S(i): [5, 6] for i in range(n)},
    )
    barrier, lock, plain = threading.Barrier(n, timeout=10), threading.Lock(), kinesis.get_records
    met: list[str] = []

    def meeting(iterator, limit, shard_id, stream):  # every check must be in flight at once to pass
        if "|4|" in iterator:  # reads from sequence number 5 on: the partial-trim check
            met.append(shard_id)
            barrier.wait()
        with lock:
            return plain(iterator, limit, shard_id, stream)

    kinesis.get_records = meeting
    reader = reader_for(kinesis)
    nxt = latest(reader, plan(3, {}, {S(i): after(5) for i in range(n)}))
    assert sorted(probes(kinesis)) == [(S(i), Position.at_sequence("5")) for i in range(n)]
    assert sorted(met) == [S(i) for i in range(n)]
    assert nxt.read == [S(i) for i in range(n)]


def restarted_wide(n: int, **options: str) -> tuple[KinesisStreamReader, FakeKinesis, Plan]:
    """A restart over ``n`` shards, each idle after sequence number 5 with record 6 to read; checks are slow:
    every clock reading is 100 ms later, 2 probe threads, a 250 ms budget."""
    from kinesis_src.spark.probes import IdleProber

    width = (TOP + 1) // n
    kinesis = fake_stream(
        [listing(i, i * width, TOP if i == n - 1 else (i + 1) * width - 1) for i in range(n)],
        {S(i): [5, 6] for i in range(n)},
    )
    reader = reader_for(kinesis, **options)
    ticks = iter(range(10**9))
    reader.driver.prober = IdleProber(kinesis, "orders", 1.0, workers=2, budget_s=0.25,
                                      clock=lambda: next(ticks) * 0.1, sleep=lambda s: None)
    return reader, kinesis, plan(3, {}, {S(i): after(5) for i in range(n)})


def test_after_a_restart_shards_wait_for_their_check_without_stalling_the_trigger() -> None:
    """The checks of one trigger stop at the probe budget; unchecked shards are neither read nor probed."""
    n = 8
    reader, kinesis, previous = restarted_wide(n)
    first = latest(reader, previous)
    checked = {sid for sid, _ in probes(kinesis)}
    assert 2 <= len(checked) < n and set(first.read) <= checked  # read only once checked
    assert {c.shard_id for c in kinesis.calls_to("get_shard_iterator")} == checked  # the others: no call yet
    start, read, rounds = first, set(first.read), 0
    while read != {S(i) for i in range(n)}:  # every shard's record 6 is read in the end
        nxt = latest(reader, start)
        if nxt.batch > start.batch:
            reader.driver.progress.by_batch[nxt.batch] = {sid: ended(6, "caught_up") for sid in nxt.read}
            start, read = nxt, read | set(nxt.read)
        rounds += 1
        assert rounds < 4 * n
    assert sorted(sid for sid, _ in probes(kinesis)) == [S(i) for i in range(n)]  # each checked once


def test_available_now_checks_every_position_before_it_plans() -> None:
    reader, kinesis, previous = restarted_wide(8)
    reader.prepareForTriggerAvailableNow()
    previous = Plan(previous.run, previous.batch, previous.shards, pending=frozenset(previous.shards))
    first = latest(reader, previous)
    assert len(probes(kinesis)) == 8 and first.read == [S(i) for i in range(8)]


def test_records_read_per_shard_are_reported_once_per_batch_however_often_spark_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(driver_module, "DISCOVERY_INTERVAL_S", 0.0)
    kinesis = fake_stream(MERGE, {S(1): [7, 8, 9], S(2): [20]})
    p1 = plan(1, {S(1): Position.trim_horizon()}, drained=frozenset({S(0)}))
    progress = RecordedEnds({1: {S(1): BatchEnd(after(7), 5, False, "record_limit", 0)}})
    reader = reader_for(kinesis, progress)
    latest(reader, p1)
    latest(reader, p1)  # Spark asks again for the same start: batch 1's records are not counted twice
    assert reader.reportLatestOffset()["recordsRead"] == {S(1): 5}
