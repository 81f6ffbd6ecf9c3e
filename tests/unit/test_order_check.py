"""kinesis_src.testing's order check on Records: check_order's report is a view of verify_delivery's scan.

``check_order`` is the per-shard view the examples print (records per shard,
every step down of a key's counter); ``verify_delivery`` is the kit's
verifier. They share one scan, so on Records at distinct positions they
agree on the verdict (checked over random deliveries below).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_src import Record
from kinesis_src.testing import OrderReport, check_order, encode, verify_delivery

PARENT, LOW, HIGH = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"


def record(key: str, n: int, shard: str, sequence: int) -> Record:
    return Record(key, encode(key, n), str(sequence), 0, shard, None)


def in_order() -> list[Record]:
    """a:1..3 and b:1..2, a:3 and b:2 read from children after their parent."""
    return [
        record("a", 1, PARENT, 1), record("b", 1, PARENT, 2), record("a", 2, PARENT, 3),
        record("a", 3, LOW, 4), record("b", 2, HIGH, 5),
    ]


EXPECTED = {("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)}


def test_a_clean_delivery_prints_the_summary_the_examples_assert_on() -> None:
    report = check_order(in_order(), EXPECTED)
    assert isinstance(report, OrderReport) and report.ok
    assert report.summary().splitlines() == [
        "per-key order check: OK",
        "  records read      5",
        "  partition keys    2",
        "  out of order      0",
        "  duplicates        0",
        "  missing           0",
        "  unexpected        0",
    ]
    assert dict(report.shards) == {PARENT: 3, LOW: 1, HIGH: 1}


def test_children_read_before_their_parent_count_one_step_down_per_key() -> None:
    """The parent's 1, 2 after the child's 3: a fall from 3 to 1 is one step down, 1 to 2 climbs again."""
    records = [record("a", 3, LOW, 4), record("a", 1, PARENT, 1), record("a", 2, PARENT, 3)]
    report = check_order(records, {("a", 1), ("a", 2), ("a", 3)})
    assert not report.ok and report.out_of_order == [f"a: 1 (in {PARENT}) after 3 (in {LOW})"]
    assert report.summary().splitlines()[0] == "per-key order check: FAILED"
    assert report.summary().splitlines()[-1] == f"    e.g. a: 1 (in {PARENT}) after 3 (in {LOW})"
    # the kit's verifier names each late first delivery instead: 1 and 2 both came after 3
    assert len(verify_delivery(records, {"a": 3}, raise_on_failure=False).out_of_order) == 2


def test_a_redelivered_record_is_a_duplicate_twice_and_a_step_down() -> None:
    """Same (key, n) and same (shard, sequence number): each counts, and n does not rise."""
    records = [*in_order(), record("b", 2, HIGH, 5)]
    report = check_order(records, EXPECTED)
    assert (report.records, report.duplicates, report.missing, report.unexpected) == (6, 2, 0, 0)
    assert report.out_of_order == [f"b: 2 (in {HIGH}) after 2 (in {HIGH})"]


def test_missing_and_unexpected_counters_are_counted() -> None:
    records = [record("a", 1, PARENT, 1), record("a", 2, PARENT, 2), record("z", 1, PARENT, 3)]
    report = check_order(records, EXPECTED)
    assert (report.missing, report.unexpected, report.keys) == (3, 1, 2)
    assert "  missing           3" in report.summary() and "  unexpected        1" in report.summary()


def test_examples_stop_at_five() -> None:
    records = [record(f"k{i}", n, PARENT, 10 * i + n) for i in range(8) for n in (2, 1)]
    report = check_order(records, {(f"k{i}", n) for i in range(8) for n in (1, 2)})
    assert len(report.out_of_order) == 8
    assert sum(line.startswith("    e.g. ") for line in report.summary().splitlines()) == 5


def test_an_item_that_is_not_a_keyed_counter_record_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="1 of 2 items are not keyed-counter Records"):
        check_order([record("a", 1, PARENT, 1), dataclasses.replace(record("a", 2, PARENT, 2), data=b"x")],
                    EXPECTED)


deliveries = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(1, 4), st.sampled_from([PARENT, LOW, HIGH])), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(deliveries, st.sets(st.tuples(st.sampled_from("ab"), st.integers(1, 4))))
def test_check_order_and_verify_delivery_agree_on_the_verdict(
    picks: list[tuple[str, int, str]], expected: set[tuple[str, int]]
) -> None:
    records = [record(key, n, shard, index) for index, (key, n, shard) in enumerate(picks)]
    ordered = check_order(records, expected)
    verified = verify_delivery(records, expected, raise_on_failure=False)
    assert ordered.ok == verified.ok
    assert ordered.missing == len(verified.missing) and ordered.unexpected == len(verified.unexpected)
    assert ordered.records == verified.delivered
