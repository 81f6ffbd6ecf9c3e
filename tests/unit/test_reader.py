"""ShardReader against an in-memory shard: limits, expiry recovery, exact ends, pacing."""

from __future__ import annotations

import pytest
from moto import mock_aws

from kinesis_src.aws import KinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import IteratorExpiredError
from kinesis_src.positions import Position, PositionKind
from kinesis_src.retrieval.cursor import EXPIRED_ITERATOR_ATTEMPTS, EXPIRED_ITERATOR_MAX_BACKOFF_S, StopReason
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.records import ChildShard, RecordPage


class FakeShard:
    """A shard of records with sequence numbers 10, 20, 30...; iterators are offsets.

    ``closed`` makes the end of the records the end of the shard (no next
    iterator, ChildShards set); ``expire`` lists call numbers that raise
    ExpiredIteratorException, as Kinesis does for iterators older than 5 minutes.
    """

    def __init__(self, count: int, closed: bool = False, expire: tuple[int, ...] = ()) -> None:
        self.seqs = [str(10 * (i + 1)) for i in range(count)]
        self.closed = closed
        self.expire = set(expire)
        self.calls = 0
        self.iterator_requests: list[Position] = []

    def get_shard_iterator(self, stream: str, shard_id: str, position: Position) -> str:
        self.iterator_requests.append(position)
        if position.kind is PositionKind.TRIM_HORIZON:
            return "0"
        seq = int(position.sequence_number or 0)
        offset = sum(1 for s in self.seqs if int(s) < seq)
        if position.kind is PositionKind.AFTER_SEQUENCE_NUMBER:
            offset = sum(1 for s in self.seqs if int(s) <= seq)
        return str(offset)

    def get_records(self, iterator: str, limit: int, shard_id: str, stream: str) -> RecordPage:
        self.calls += 1
        if self.calls in self.expire:
            raise IteratorExpiredError("Iterator expired")
        start = int(iterator)
        seqs = self.seqs[start : start + limit]
        end = start + len(seqs)
        ended = self.closed and end == len(self.seqs)
        return RecordPage(
            partition_keys=[f"k{s}" for s in seqs],
            data=[s.encode() for s in seqs],
            sequence_numbers=seqs,
            arrival_epoch=[float(s) for s in seqs],  # record i arrived at second 10*(i+1)
            encryption_types=[None] * len(seqs),
            next_iterator=None if ended else str(end),
            millis_behind_latest=0 if end == len(self.seqs) else 1000,
            child_shards=(ChildShard("shardId-000000000002", ("shardId-000000000000",), 0, 5),) if ended else (),
        )


def reader(shard: FakeShard, start: Position | None = None, **kw) -> ShardReader:
    kw.setdefault("fetch_interval_s", 0)
    return ShardReader(shard, "s", "shardId-000000000000", start or Position.trim_horizon(), **kw)  # type: ignore[arg-type]


def seqs(read) -> list[str]:
    return [r.sequence_number for r in read.records()]


def test_record_limit_never_overshoots_and_position_advances() -> None:
    shard = FakeShard(25)
    r = reader(shard, max_records_per_fetch=10)
    first = r.read(max_records=13)
    assert first.stop_reason is StopReason.RECORD_LIMIT
    assert seqs(first) == shard.seqs[:13]
    assert first.next_position == Position.after_sequence("130")
    second = r.read(until_caught_up=True)
    assert seqs(second) == shard.seqs[13:]
    assert second.stop_reason is StopReason.CAUGHT_UP


def test_closed_shard_reads_to_shard_end_and_reports_children() -> None:
    shard = FakeShard(5, closed=True)
    r = reader(shard)
    read = r.read(max_records=100)
    assert read.stop_reason is StopReason.SHARD_END and read.shard_ended
    assert [c.shard_id for c in read.child_shards] == ["shardId-000000000002"]
    assert r.read(max_records=1).stop_reason is StopReason.SHARD_END
    with pytest.raises(ValueError, match="SHARD_END"):
        r.fetch()


def test_expired_iterator_resumes_after_the_last_record_delivered() -> None:
    shard = FakeShard(30, expire=(3,))
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(max_records=30)
    assert seqs(read) == shard.seqs  # nothing lost, nothing repeated
    assert shard.iterator_requests == [Position.trim_horizon(), Position.after_sequence("200")]


def test_expiry_a_few_times_in_a_row_is_ridden_out() -> None:
    """The fault campaign: two expiries in a row failed a Spark task (only one re-acquisition was tried)."""
    shard = FakeShard(30, expire=(1, 2, 3, 4))
    assert seqs(reader(shard).read(max_records=30)) == shard.seqs


def test_expiry_again_and_again_backs_off_then_is_an_error_not_a_loop() -> None:
    shard = FakeShard(30, expire=tuple(range(1, EXPIRED_ITERATOR_ATTEMPTS + 1)))
    slept: list[float] = []
    with pytest.raises(IteratorExpiredError):
        reader(shard, sleep=slept.append).read(max_records=30)
    assert shard.calls == EXPIRED_ITERATOR_ATTEMPTS
    assert slept == sorted(slept) and slept[-1] == EXPIRED_ITERATOR_MAX_BACKOFF_S and 10 < sum(slept) < 20


@pytest.mark.parametrize("end, expected", [("70", 7), ("75", 7), ("10", 1), ("300", 30)])
def test_end_sequence_stops_exactly_there_and_resumes_after_it(end: str, expected: int) -> None:
    shard = FakeShard(30)
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(end_sequence=end, max_records=1000)
    assert seqs(read) == shard.seqs[:expected]
    assert read.stop_reason is StopReason.END_SEQUENCE
    rest = r.read(until_caught_up=True)
    assert seqs(rest) == shard.seqs[expected:]


def test_end_before_anything_read_keeps_the_start_position() -> None:
    shard = FakeShard(10)
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

    shard = FakeShard(100)
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
    from datetime import datetime, timezone

    shard = FakeShard(30)
    r = reader(shard, max_records_per_fetch=10)
    read = r.read(end_timestamp=datetime.fromtimestamp(125, timezone.utc), max_records=1000)
    assert seqs(read) == shard.seqs[:12]
    assert read.stop_reason is StopReason.END_TIMESTAMP
    assert read.next_position == Position.after_sequence("120")
    assert seqs(r.read(until_caught_up=True)) == shard.seqs[12:]
