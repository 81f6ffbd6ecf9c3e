"""The shard cursor every driver moves: position, de-aggregation, cuts, ends, expiry (pure, no I/O)."""

from __future__ import annotations

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_src.errors import MalformedAggregateError
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard, RecordPage
from kinesis_src.retrieval.cursor import (
    EXPIRED_ITERATOR_ATTEMPTS,
    EXPIRED_ITERATOR_MAX_BACKOFF_S,
    CursorState,
    ReadEnd,
    ShardCursor,
    StopReason,
)

SHARD = "shardId-000000000000"
CHILD = ChildShard("shardId-000000000001", (SHARD,), 0, 10)


def aggregate(*keys: str) -> bytes:
    """One KPL aggregate of user records ``key:i``, built by the reference aggregator."""
    agg = RecordAggregator()
    for i, key in enumerate(keys):
        agg.add_user_record(key, f"{key}:{i}".encode())
    record = agg.clear_and_get()
    assert record is not None
    _pk, _ehk, data = record.get_contents()
    return data


def raw(rows: list[tuple[int, bytes]], *, end: bool = False, lag: int | None = 5) -> RecordPage:
    """A GetRecords page as the wire gives it: (sequence, data) per Kinesis record."""
    return RecordPage(
        partition_keys=[f"p{seq}" for seq, _ in rows],
        data=[data for _, data in rows],
        sequence_numbers=[f"{seq:05d}" for seq, _ in rows],
        arrival_epoch=[1000.0 + seq for seq, _ in rows],
        encryption_types=[None for _ in rows],
        next_iterator=None if end else "next",
        millis_behind_latest=lag,
        child_shards=(CHILD,) if end else (),
    )


def cursor(start: Position | None = None, **kwargs) -> ShardCursor:
    return ShardCursor("orders", SHARD, start or Position.trim_horizon(), **kwargs)


def rows(page: RecordPage) -> list[tuple[str, int, bytes]]:
    return [(r.sequence_number, r.sub_sequence_number, r.data) for r in page.records(SHARD)]


def test_a_plain_page_passes_through_unchanged_and_moves_the_position_after_its_last_record() -> None:
    c = cursor()
    page = raw([(1, b"a"), (2, b"b")])
    step = c.accept(page)
    assert step.page is page and step.stop is None and step.raw_records == 2 and not step.reacquire
    assert c.position == Position.after_sequence("00002") and c.state is CursorState.READING


def test_aggregates_become_user_records_sharing_the_sequence_number() -> None:
    c = cursor()
    step = c.accept(raw([(1, b"plain"), (2, aggregate("x", "y", "z"))]))
    assert rows(step.page) == [("00001", 0, b"plain"), ("00002", 0, b"x:0"), ("00002", 1, b"y:1"), ("00002", 2, b"z:2")]
    assert [r.partition_key for r in step.page.records(SHARD)][1:] == ["x", "y", "z"]
    assert step.raw_records == 2 and c.aggregates == 1 and c.malformed_aggregates == 0
    assert c.position == Position.after_sequence("00002")  # a page holds whole aggregates


def test_resuming_inside_an_aggregate_drops_the_user_records_already_acknowledged() -> None:
    c = cursor(Position.after_sequence("00002", 1))
    step = c.accept(raw([(2, aggregate("x", "y", "z")), (3, b"next")]))
    assert rows(step.page) == [("00002", 2, b"z:2"), ("00003", 0, b"next")]
    assert c.position == Position.after_sequence("00003")


def test_resuming_after_the_last_user_record_of_an_aggregate_drops_it_whole() -> None:
    c = cursor(Position.after_sequence("00002", 2))
    step = c.accept(raw([(2, aggregate("x", "y", "z"))]))
    assert rows(step.page) == [] and step.raw_records == 1
    assert c.position == Position.after_sequence("00002")


def test_a_checkpointed_plain_record_read_again_at_its_sequence_number_is_dropped() -> None:
    c = cursor(Position.after_sequence("00007", 0))
    assert c.accept(raw([(7, b"seen"), (8, b"new")])).page.data == [b"new"]


def test_an_empty_page_before_the_checkpointed_record_keeps_the_position_inside_it() -> None:
    c = cursor(Position.after_sequence("00002", 1))
    c.accept(raw([]))
    assert c.position == Position.after_sequence("00002", 1)


def test_a_cut_at_an_end_sequence_never_splits_an_aggregate() -> None:
    c = cursor()
    step = c.accept(raw([(1, aggregate("a", "b")), (2, aggregate("c", "d")), (3, b"e")]), ReadEnd.of("00002"))
    assert rows(step.page) == [("00001", 0, b"a:0"), ("00001", 1, b"b:1"), ("00002", 0, b"c:0"), ("00002", 1, b"d:1")]
    assert step.stop is StopReason.END_SEQUENCE and step.reacquire
    assert c.position == Position.after_sequence("00002")


def test_a_cut_before_the_final_page_ends_does_not_end_the_shard() -> None:
    c = cursor()
    step = c.accept(raw([(1, b"a"), (2, b"b")], end=True), ReadEnd.of("00001"))
    assert step.stop is StopReason.END_SEQUENCE and not c.ended and c.child_shards == ()


def test_an_end_sequence_at_the_last_record_of_the_final_page_still_sees_the_end() -> None:
    c = cursor()
    step = c.accept(raw([(1, b"a")], end=True), ReadEnd.of("00001"))
    assert step.stop is StopReason.SHARD_END and c.ended and c.child_shards == (CHILD,)


def test_an_end_timestamp_stops_before_the_first_later_record() -> None:
    c = cursor()
    end = ReadEnd(timestamp=1001.5)
    step = c.accept(raw([(1, b"a"), (2, b"b")]), end)
    assert step.page.data == [b"a"] and step.stop is StopReason.END_TIMESTAMP and step.reacquire


def test_the_final_page_ends_the_shard_and_names_the_children() -> None:
    c = cursor()
    step = c.accept(raw([(1, b"a")], end=True))
    assert step.stop is StopReason.SHARD_END and c.ended and c.child_shards == (CHILD,)
    assert c.stopped_before_reading() is StopReason.SHARD_END


def test_a_position_at_or_past_the_end_sequence_stops_before_reading_unless_inside_an_aggregate() -> None:
    assert cursor(Position.after_sequence("00005")).stopped_before_reading(ReadEnd.of("00005")) is StopReason.END_SEQUENCE
    assert cursor(Position.after_sequence("00005", 1)).stopped_before_reading(ReadEnd.of("00005")) is None
    assert cursor(Position.after_sequence("00004")).stopped_before_reading(ReadEnd.of("00005")) is None


def test_malformed_aggregates_pass_through_whole_and_are_counted_unless_strict() -> None:
    broken = aggregate("x", "y")[:-3] + b"\x00\x00\x00"  # the MD5 no longer matches
    seen: list[tuple[int, int]] = []
    c = cursor(on_deaggregated=lambda aggregates, malformed: seen.append((aggregates, malformed)))
    step = c.accept(raw([(1, broken)]))
    assert step.page.data == [broken] and c.malformed_aggregates == 1 and seen == [(0, 1)]
    with pytest.raises(MalformedAggregateError, match="00001"):
        cursor(strict_aggregation=True).accept(raw([(1, broken)]))


def test_expired_iterators_back_off_after_the_first_and_give_up_after_the_limit() -> None:
    c = cursor()
    waits = [c.iterator_expired() for _ in range(EXPIRED_ITERATOR_ATTEMPTS)]
    assert waits[0] == 0 and waits[1] > 0 and max(waits) == EXPIRED_ITERATOR_MAX_BACKOFF_S
    assert waits == sorted(waits) and c.expiry_exhausted
    c.accept(raw([]))
    assert c.expired_in_a_row == 0 and not c.expiry_exhausted


def test_iterators_expiring_thousands_of_times_in_a_row_wait_the_bound() -> None:
    """An unbounded reader re-acquires for as long as it takes: the wait stays at the bound."""
    c = cursor()
    c.expired_in_a_row = 1_100
    assert c.iterator_expired() == EXPIRED_ITERATOR_MAX_BACKOFF_S


def test_max_records_cuts_after_the_aggregate_holding_the_last_record_asked_for() -> None:
    """GetRecords' Limit counts Kinesis records: two aggregates of 3 under max_records=4 keep 6, not 4 or 7."""
    c = cursor()
    step = c.accept(raw([(1, aggregate("a", "b", "c")), (2, aggregate("d", "e", "f")), (3, b"plain")]), max_records=4)
    assert [r[2] for r in rows(step.page)] == [b"a:0", b"b:1", b"c:2", b"d:0", b"e:1", b"f:2"]
    assert step.stop is StopReason.RECORD_LIMIT and step.reacquire
    assert c.position == Position.after_sequence("00002") and c.state is CursorState.READING


def test_max_records_counts_only_the_records_not_yet_delivered_inside_an_aggregate() -> None:
    c = cursor(Position.after_sequence("00001", 0))
    step = c.accept(raw([(1, aggregate("a", "b", "c")), (2, b"d"), (3, b"e")]), max_records=3)
    assert [r[2] for r in rows(step.page)] == [b"b:1", b"c:2", b"d"]
    assert step.stop is StopReason.RECORD_LIMIT and c.position == Position.after_sequence("00002")


def test_max_records_that_the_page_fits_cuts_nothing_and_a_final_page_still_ends_the_shard() -> None:
    c = cursor()
    step = c.accept(raw([(1, aggregate("a", "b")), (2, b"c")], end=True), max_records=3)
    assert len(step.page) == 3 and step.stop is StopReason.SHARD_END and c.ended
    c = cursor()
    step = c.accept(raw([(1, b"a"), (2, aggregate("b", "c"))], end=True), max_records=2)
    assert len(step.page) == 3 and step.stop is StopReason.SHARD_END  # the last aggregate is never split


def test_a_resume_whose_record_was_trimmed_names_the_first_record_read_instead() -> None:
    """Resuming reads AT the checkpointed record: a page starting elsewhere means it expired."""
    c = cursor(Position.after_sequence("00007", 0))
    step = c.accept(raw([(12, b"a"), (13, b"b")]))
    assert step.resumed_past == "00012" and len(step.page) == 2 and c.position == Position.after_sequence("00013")
    assert c.accept(raw([(14, b"c")])).resumed_past is None  # judged once, on the first records


def test_a_resume_whose_record_is_still_there_is_no_gap_and_an_empty_page_defers_the_judgement() -> None:
    c = cursor(Position.after_sequence("00007", 0))
    assert c.accept(raw([])).resumed_past is None and c.position == Position.after_sequence("00007", 0)
    step = c.accept(raw([(7, b"old"), (8, b"new")]))
    assert step.resumed_past is None and [r[2] for r in rows(step.page)] == [b"new"]
