"""KeyRange: slices tile the space, parsing names the option, hash keys match Kinesis' routing."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_src import KeyRange
from lineage import MAX_HASH_KEY, HashRange, KeyRangeError, hash_key_of


@given(st.integers(min_value=1, max_value=5000))
@example(1)
@example(3)
def test_slices_tile_the_space_without_gaps_or_overlaps(count: int) -> None:
    slices = [KeyRange.slice(i, count) for i in range(count)]
    assert slices[0].start == 0
    assert slices[-1].end == MAX_HASH_KEY
    for left, right in itertools.pairwise(slices):
        assert left.end + 1 == right.start
    sizes = {s.size for s in slices}
    assert max(sizes) - min(sizes) <= 1


@given(st.integers(min_value=0, max_value=MAX_HASH_KEY), st.integers(min_value=1, max_value=64))
def test_every_hash_key_falls_in_exactly_one_slice(hash_key: int, count: int) -> None:
    owners = [i for i in range(count) if hash_key in KeyRange.slice(i, count)]
    assert len(owners) == 1


def test_parse_accepts_bounds_and_slices() -> None:
    assert KeyRange.parse("10-20") == KeyRange(10, 20)
    assert KeyRange.parse(" 1 / 4 ") == KeyRange.slice(1, 4)
    assert KeyRange.parse(f"0-{MAX_HASH_KEY}") == KeyRange.full()
    assert str(KeyRange(3, 9)) == "3-9"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("4/4", "slice index must be 0..3"),
        ("0/0", "slice count must be an integer >= 1"),
        ("20-10", "start 20 > end 10"),
        (f"0-{MAX_HASH_KEY + 1}", "outside 0..2**128-1"),
        ("abc", "is not a key range"),
        ("-5-3", "is not a key range"),
    ],
)
def test_parse_rejects_bad_ranges_naming_the_option(text: str, fragment: str) -> None:
    with pytest.raises(KeyRangeError) as caught:
        KeyRange.parse(text, "hashKeyRange")
    assert "hashKeyRange" in str(caught.value)
    assert fragment in str(caught.value)


def test_key_range_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        KeyRange(5, 1)


def test_hash_key_is_md5_of_the_partition_key_unless_explicit() -> None:
    assert hash_key_of("orders-1") == int(hashlib.md5(b"orders-1").hexdigest(), 16)
    assert hash_key_of("orders-1", "42") == 42
    assert hash_key_of("orders-1", "") == hash_key_of("orders-1")


def test_overlap_and_cover_against_shard_ranges() -> None:
    half = KeyRange.slice(0, 2)
    assert half.overlaps(HashRange(0, 10))
    assert half.covers(HashRange(0, 10))
    assert not half.covers(HashRange(0, MAX_HASH_KEY))
    assert not half.overlaps(HashRange(half.end + 1, MAX_HASH_KEY))
