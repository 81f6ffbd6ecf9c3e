"""Units: the lease sets tiling the hash space (kinesis_src/consumer/units.py, unit_registry.py), pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_src.consumer import unit_registry
from kinesis_src.consumer.units import (
    FULL,
    Split,
    UnitMap,
    check_tiling,
    pieces,
    scope_of,
    unit_of_scope,
)
from lineage import KeyRange
from lineage.hashspace import MAX_HASH_KEY

keys = st.integers(0, MAX_HASH_KEY)


@st.composite
def ranges(draw: st.DrawFn) -> KeyRange:
    a, b = draw(keys), draw(keys)
    return KeyRange(min(a, b), max(a, b))


def test_the_whole_space_is_the_ordinary_lease_set_and_a_piece_is_named_by_its_range() -> None:
    assert scope_of(FULL) == "" and unit_of_scope("") == FULL
    half = KeyRange.slice(0, 2)
    assert scope_of(half) == str(half) and unit_of_scope(str(half)) == half
    assert UnitMap().units == (FULL,)


@given(ranges(), ranges())
def test_pieces_tile_the_unit_and_one_piece_is_the_part_inside_the_claim(unit: KeyRange, claim: KeyRange) -> None:
    cut = pieces(unit, claim)
    check_tiling(cut, unit)
    if claim.overlaps(unit) and not claim.covers(unit):
        assert sum(claim.covers(p) for p in cut) == 1
        assert all(claim.covers(p) or not claim.overlaps(p) for p in cut)
    else:
        assert cut == (unit,)


@given(st.lists(ranges(), min_size=1, max_size=6))
def test_claims_become_unions_of_units_once_their_splits_are_done(claims: list[KeyRange]) -> None:
    units = UnitMap()
    for n, claim in enumerate(claims):
        units = units.with_claim(claim, f"w{n}")
        for split in units.splitting(claim):
            units = units.after(split)
        assert units.is_union(claim)
        assert units.splits == ()
        assert KeyRange(min(u.start for u in units.inside(claim)), max(u.end for u in units.inside(claim))) == claim
    check_tiling(units.units)
    for claim in claims:  # an earlier claim is still a union: units only ever get finer
        assert units.is_union(claim)


@given(ranges(), ranges())
def test_workers_without_a_range_read_what_no_claim_overlaps_and_nothing_being_split(a: KeyRange, b: KeyRange) -> None:
    units = UnitMap().with_claim(a, "sticky")
    assert units.unclaimed([]) == (() if units.splits else (FULL,))
    for split in units.splits:
        units = units.after(split)
    free = units.unclaimed([a])
    assert not any(a.overlaps(u) for u in free)
    assert sum(u.size for u in free) + sum(u.size for u in units.inside(a)) == FULL.size
    pending = units.with_claim(b, "other")
    assert not {s.unit for s in pending.splits} & set(pending.unclaimed([]))


def test_a_split_under_way_is_kept_and_a_finished_one_is_a_no_op() -> None:
    lower = KeyRange.slice(0, 2)
    units = UnitMap().with_claim(lower, "a")
    assert units.splits == (Split(FULL, (lower, KeyRange.slice(1, 2)), "a"),)
    assert units.with_claim(KeyRange.slice(0, 4), "b") == units  # the unit is being split already
    done = units.after(units.splits[0])
    assert done.units == (lower, KeyRange.slice(1, 2))
    assert done.after(units.splits[0]) == done


def test_a_map_that_does_not_tile_the_space_is_refused() -> None:
    with pytest.raises(ValueError, match="do not tile"):
        UnitMap((KeyRange.slice(0, 2),))
    with pytest.raises(ValueError, match="not a unit"):
        UnitMap((FULL,), (Split(KeyRange.slice(0, 2), (KeyRange.slice(0, 4), KeyRange.slice(1, 4)), "a"),))


@given(st.lists(ranges(), min_size=0, max_size=4))
def test_the_registry_attributes_round_trip(claims: list[KeyRange]) -> None:
    units = UnitMap()
    for n, claim in enumerate(claims):
        units = units.with_claim(claim, f"w{n}")
        if n % 2:
            for split in units.splitting(claim):
                units = units.after(split)
    values = unit_registry.encode(units)
    item = {"units": values[":units"], "splits": values[":splits"]}
    assert unit_registry.decode(item) == units
    assert unit_registry.decode(None) == UnitMap() == unit_registry.decode({"version": {"N": "3"}})
