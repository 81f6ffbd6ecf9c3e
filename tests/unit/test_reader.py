"""ShardReader against an in-memory shard: limits, expiry recovery, exact ends, pacing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fake_kinesis import FakeKinesis
from moto import mock_aws

from kinesis_src.aws import KinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import IteratorExpiredError
from kinesis_src.positions import Position
from kinesis_src.retrieval.cursor import (
    EXPIRED_ITERATOR_ATTEMPTS,
    EXPIRED_ITERATOR_MAX_BACKOFF_S,
    StopReason,
)
from kinesis_src.retrieval.polling import ShardReader

SHARD = "shardId-000000000000"


class OneShard:
    """Shard 0 of stream "s" on the shared fake: records with sequence numbers 10, 20, 30...

    Record i arrived at second 10*(i+1). ``closed`` merges shard 0 with shard 1
    after the records were put, so reading to their end is SHARD_END with the
    child shardId-000000000002. ``expire`` lists GetRecords call numbers that
    raise ExpiredIteratorException, as Kinesis does for iterators older than 5 minutes.
    """

    def __init__(self, count: int, closed: bool = False, expire: tuple[int, ...] = ()) -> None:
        self.kinesis = FakeKinesis(clock=0.0)
        self.kinesis.create_stream("s", 2)
        self.seqs = [str(10 * (i + 1)) for i in range(count)]
        for seq in self.seqs:
            self.kinesis.put_record("s", f"k{seq}", seq.encode(), shard_id=SHARD, sequence_number=seq, arrival=float(seq))
        if closed:
            self.kinesis.merge_shards("s", SHARD, "shardId-000000000001")
        if expire:
            self.kinesis.inject("get_records", IteratorExpiredError("Iterator expired"), calls=expire)

    @property
    def calls(self) -> int:
        return self.kinesis.count("get_records")

    @property
    def iterator_requests(self) -> list[Position]:
        return [c.position for c in self.kinesis.calls_to("get_shard_iterator")]


def reader(shard: OneShard, start: Position | None = None, **kw) -> ShardReader:
    kw.setdefault("fetch_interval_s", 0)
    return ShardReader(shard.kinesis, "s", SHARD, start or Position.trim_horizon(), **kw)  # type: ignore[arg-type]


def seqs(read) -> list[str]:
    return [r.sequence_number for r in read.records()]


def test_record_limit_never_overshoots_and_position_advances() -> None:
    shard = OneShard(25)
    r = reader(shard, max_records_per_fetch=10)
    first = r.read(max_records=13)
    assert first.stop_reason is StopReason.RECORD_LIMIT
    assert seqs(first) == shard.seqs[:13]
    assert first.next_position == Position.after_sequence("130")
    second = r.read(until_caught_up=True)
    assert seqs(second) == shard.seqs[13:]
    assert second.stop_reason is StopReason.CAUGHT_UP


def test_closed_shard_reads_to_shard_end_and_reports_children() -> None:
    shard = OneShard(5, closed=True)
    r = reader(shard)
    read = r.read(max_records=100)
    assert read.stop_reason is StopReason.SHARD_END and read.shard_ended
    assert [c.shard_id for c in read.child_shards] == ["shardId-000000000002"]
    assert r.read(max_records=1).stop_reason is StopReason.SHARD_END
    with pytest.raises(ValueError, match="SHARD_END"):
        r.fetch()


def test_expired_iterator_resumes_after_the_last_record_delivered() -> None:
    shard = OneShard(30, expire=(3,))
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(max_records=30)
    assert seqs(read) == shard.seqs  # nothing lost, nothing repeated
    assert shard.iterator_requests == [Position.trim_horizon(), Position.after_sequence("200")]


def test_expiry_a_few_times_in_a_row_is_ridden_out() -> None:
    """The fault campaign: two expiries in a row failed a Spark task (only one re-acquisition was tried)."""
    shard = OneShard(30, expire=(1, 2, 3, 4))
    assert seqs(reader(shard).read(max_records=30)) == shard.seqs


def test_expiry_again_and_again_backs_off_then_is_an_error_not_a_loop() -> None:
    shard = OneShard(30, expire=tuple(range(1, EXPIRED_ITERATOR_ATTEMPTS + 1)))
    slept: list[float] = []
    with pytest.raises(IteratorExpiredError):
        reader(shard, sleep=slept.append).read(max_records=30)
    assert shard.calls == EXPIRED_ITERATOR_ATTEMPTS
    assert slept == sorted(slept) and slept[-1] == EXPIRED_ITERATOR_MAX_BACKOFF_S and 10 < sum(slept) < 20


@pytest.mark.parametrize("end, expected", [("70", 7), ("75", 7), ("10", 1), ("300", 30)])
def test_end_sequence_stops_exactly_there_and_resumes_after_it(end: str, expected: int) -> None:
    shard = OneShard(30)
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(end_sequence=end, max_records=1000)
    assert seqs(read) == shard.seqs[:expected]
    assert read.stop_reason is StopReason.END_SEQUENCE
    rest = r.read(until_caught_up=True)
    assert seqs(rest) == shard.seqs[expected:]


def test_end_before_anything_read_keeps_the_start_position() -> None:
    shard = OneShard(10)
    r = reader(shard, Position.after_sequence("50"))
    read = r.read(end_sequence="55")
    assert seqs(read) == []
    assert read.next_position == Position.after_sequence("50")
    assert r.read(end_sequence="55").stop_reason is StopReason.END_SEQUENCE


def test_time_limit_and_pacing_use_the_clock() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    shard = OneShard(100)
    r = reader(shard, max_records_per_fetch=10, fetch_interval_s=0.2, clock=lambda: now[0], sleep=sleep)
    read = r.read(max_duration_s=1.0)
    assert read.stop_reason is StopReason.TIME_LIMIT
    assert read.record_count == 60  # one call now, then one per 0.2 s until 1.0 s
    assert slept and all(s == pytest.approx(0.2) for s in slept)


def test_reads_a_moto_stream_through_the_fast_path(dummy_credentials: None) -> None:
    import boto3

    with mock_aws():
        plain = boto3.client("kinesis", region_name="us-east-1")
        plain.create_stream(StreamName="s", ShardCount=1)
        for i in range(50):
            plain.put_record(StreamName="s", PartitionKey=f"k{i % 3}", Data=str(i).encode())
        kinesis = KinesisClient(AwsSettings(region="us-east-1"))
        r = ShardReader(kinesis, "s", "shardId-000000000000", Position.trim_horizon(), max_records_per_fetch=7, fetch_interval_s=0)
        read = r.read(max_records=50)
        assert [rec.data for rec in read.records()] == [str(i).encode() for i in range(50)]
        assert all(rec.shard_id == "shardId-000000000000" for rec in read.records())


def test_end_timestamp_stops_before_the_first_later_record() -> None:
    shard = OneShard(30)
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(end_timestamp=datetime.fromtimestamp(125, UTC), max_records=1000)
    assert seqs(read) == shard.seqs[:12]
    assert read.stop_reason is StopReason.END_TIMESTAMP
    assert read.next_position == Position.after_sequence("120")
    assert seqs(r.read(until_caught_up=True)) == shard.seqs[12:]


def test_pages_come_out_one_call_at_a_time_and_end_with_the_stop_reason() -> None:
    shard = OneShard(25)
    r = reader(shard, max_records_per_fetch=10)
    pages = r.iter_pages(until_caught_up=True)
    assert [s for s in next(pages).sequence_numbers] == shard.seqs[:10]
    assert shard.calls == 1  # the next page is not fetched before this one is taken
    rest = []
    with pytest.raises(StopIteration) as done:
        while True:
            rest.append(next(pages))
    assert done.value.value is StopReason.CAUGHT_UP
    assert [s for p in rest for s in p.sequence_numbers] == shard.seqs[10:]
    assert r.position == Position.after_sequence(shard.seqs[-1])


def batch_task(shard: OneShard, monkeypatch: pytest.MonkeyPatch, **kw):
    """A Spark batch task's read of shard 0, on the fake: the generator of its Arrow batches."""
    from kinesis_src.spark import tasks
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice

    monkeypatch.setattr(tasks, "kinesis_client", lambda endpoint: shard.kinesis)
    partition = KinesisPartition(
        index=0, stream="s", endpoint=Endpoint("us-east-1", None, None),
        slices=(ShardSlice(SHARD, Position.trim_horizon().to_dict()),),
        fetch_interval_ms=0, end_timestamp="2100-01-01T00:00:00Z", **kw,
    )
    return tasks.read_partition(partition)


def test_a_batch_task_hands_each_page_to_spark_before_fetching_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's JVM converts one page while the task fetches and decodes the next; the task holds one page."""
    shard = OneShard(25)
    batches = batch_task(shard, monkeypatch, max_records_per_fetch=10)
    first = next(batches)
    assert first.column("sequenceNumber").to_pylist() == shard.seqs[:10]
    assert shard.calls == 1
    rest = list(batches)
    assert [s for b in rest for s in b.column("sequenceNumber").to_pylist()] == shard.seqs[10:]
    assert [b.num_rows for b in rest] == [10, 5]


def test_a_batch_task_stopped_early_closes_its_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """A LIMIT makes Spark close the generator: a fan-out subscription must not stay open."""
    from kinesis_src.retrieval.bounded import BoundedRead

    closed: list[str] = []
    monkeypatch.setattr(BoundedRead, "close", lambda self: closed.append(self.shard_id))
    batches = batch_task(OneShard(25), monkeypatch, max_records_per_fetch=10)
    next(batches)
    assert closed == []
    batches.close()
    assert closed == [SHARD]


def test_planning_batch_reads_in_one_process_builds_one_kinesis_client(
    dummy_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark reuses the planner's Python worker; a botocore client costs 0.1-0.5 s to build."""
    import boto3

    from kinesis_src.spark import tasks
    from kinesis_src.spark.batch import KinesisBatchReader
    from kinesis_src.spark.options import parse_options

    built: list[AwsSettings] = []

    class Counted(KinesisClient):
        def __init__(self, settings: AwsSettings, *args, **kwargs) -> None:
            built.append(settings)
            super().__init__(settings, *args, **kwargs)

    monkeypatch.setattr(tasks, "KinesisClient", Counted)
    tasks.kinesis_client.cache_clear()
    with mock_aws():
        boto3.client("kinesis", region_name="us-east-1").create_stream(StreamName="s", ShardCount=2)
        # environ={}: an endpoint left in os.environ by an earlier test (the Spark fixture sets the emulators')
        # must not send this read past moto
        options = parse_options({"streamName": "s", "region": "us-east-1"}, batch=True, environ={})
        plans = [KinesisBatchReader(options).partitions() for _ in range(2)]
    tasks.kinesis_client.cache_clear()
    assert [len(p) for p in plans] == [2, 2]
    assert len(built) == 1
