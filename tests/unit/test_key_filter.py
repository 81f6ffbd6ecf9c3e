"""filter_page keeps exactly the rows whose hash key is in the range, and the page's read state."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinesis_src import KeyRange
from kinesis_src.key_filter import filter_page
from kinesis_src.records import RecordPage
from lineage import hash_key_of


def page_of(keys: list[str], explicit: list[str | None] | None = None) -> RecordPage:
    n = len(keys)
    return RecordPage(
        partition_keys=list(keys),
        data=[k.encode() for k in keys],
        sequence_numbers=[str(10 + i) for i in range(n)],
        arrival_epoch=[1.0] * n,
        encryption_types=[None] * n,
        next_iterator="it",
        millis_behind_latest=5,
        sub_sequence_numbers=None if explicit is None else list(range(n)),
        explicit_hash_keys=explicit,
    )


@given(st.lists(st.text(min_size=1, max_size=8), max_size=40), st.integers(1, 5))
def test_slices_split_a_page_into_disjoint_parts_that_cover_it(keys: list[str], count: int) -> None:
    page = page_of(keys)
    parts = [filter_page(page, KeyRange.slice(i, count)) for i in range(count)]
    seen = sorted(s for part in parts for s in part.sequence_numbers)
    assert seen == sorted(page.sequence_numbers)
    for i, part in enumerate(parts):
        assert all(hash_key_of(pk) in KeyRange.slice(i, count) for pk in part.partition_keys)
        assert part.next_iterator == "it"
        assert part.millis_behind_latest == 5
        assert part.data == [pk.encode() for pk in part.partition_keys]


def test_an_explicit_hash_key_places_a_kpl_user_record() -> None:
    page = page_of(["a", "b"], explicit=["0", None])
    first_half = filter_page(page, KeyRange(0, 10))
    assert first_half.partition_keys == ["a"] + (["b"] if hash_key_of("b") <= 10 else [])
    assert first_half.sub_sequence_numbers == [0]


def test_a_page_entirely_in_range_is_returned_as_is() -> None:
    page = page_of(["x", "y"])
    assert filter_page(page, KeyRange.full()) is page
