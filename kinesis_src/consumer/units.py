"""Units: the lease sets that tile an application's hash space on one stream (pure arithmetic).

A claim must be a union of units: one that cuts a unit splits it (:mod:`.unit_split`); units never
merge. The whole space's scope is "" (the ordinary leases), a piece's its range as text."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

from lineage import KeyRange
from lineage.hashspace import MAX_HASH_KEY, MIN_HASH_KEY

FULL = KeyRange(MIN_HASH_KEY, MAX_HASH_KEY)


def scope_of(unit: KeyRange) -> str:
    """The lease scope of a unit: "" for the whole space (the ordinary leases), else ``"START-END"``."""
    return "" if unit == FULL else str(unit)


def describe(unit: KeyRange) -> str:
    """A unit for log lines and errors."""
    return "the whole hash space" if unit == FULL else f"key range {unit}"


def unit_of_scope(scope: str) -> KeyRange:
    return FULL if scope == "" else KeyRange.parse(scope, "scope")


def pieces(unit: KeyRange, claim: KeyRange) -> tuple[KeyRange, ...]:
    """``unit`` cut by ``claim``: the part inside it and the parts left on either side, in order;
    the unit alone when the claim covers or misses it."""
    if not claim.overlaps(unit) or claim.covers(unit):
        return (unit,)
    inside = KeyRange(max(unit.start, claim.start), min(unit.end, claim.end))
    out = []
    if unit.start < inside.start:
        out.append(KeyRange(unit.start, inside.start - 1))
    out.append(inside)
    if inside.end < unit.end:
        out.append(KeyRange(inside.end + 1, unit.end))
    return tuple(out)


@dataclass(frozen=True)
class Split:
    """A unit being replaced by its pieces, started by ``claimer`` (finished by whoever finds it)."""

    unit: KeyRange
    pieces: tuple[KeyRange, ...]
    claimer: str


@dataclass(frozen=True)
class UnitMap:
    """The units of one (application, stream), in hash order, and the splits under way."""

    units: tuple[KeyRange, ...] = (FULL,)
    splits: tuple[Split, ...] = ()

    def __post_init__(self) -> None:
        check_tiling(self.units)
        for split in self.splits:
            if split.unit not in self.units:
                raise ValueError(f"split of {split.unit}, which is not a unit of {_text(self.units)}")
            check_tiling(split.pieces, split.unit)

    def with_claim(self, claim: KeyRange, claimer: str) -> UnitMap:
        """The map with a split recorded for every unit ``claim`` cuts (a split already under way stays)."""
        splitting = {s.unit for s in self.splits}
        new = tuple(
            Split(u, pieces(u, claim), claimer) for u in self.units
            if u not in splitting and len(pieces(u, claim)) > 1
        )
        return replace(self, splits=self.splits + new) if new else self

    def after(self, split: Split) -> UnitMap:
        """The map once ``split`` is done: its unit replaced by its pieces."""
        if split.unit not in self.units:
            return self  # done already
        units = sorted(self.units[:self.units.index(split.unit)] + split.pieces
                       + self.units[self.units.index(split.unit) + 1:])
        return UnitMap(tuple(units), tuple(s for s in self.splits if s.unit != split.unit))

    def splitting(self, key_range: KeyRange) -> tuple[Split, ...]:
        """Splits under way of units that overlap ``key_range``."""
        return tuple(s for s in self.splits if s.unit.overlaps(key_range))

    def inside(self, claim: KeyRange) -> tuple[KeyRange, ...]:
        """The units ``claim`` covers (all its units once its splits are done)."""
        return tuple(u for u in self.units if claim.covers(u))

    def is_union(self, claim: KeyRange) -> bool:
        """True when ``claim`` is exactly a union of units (no unit it overlaps is cut)."""
        return all(claim.covers(u) for u in self.units if claim.overlaps(u))

    def unclaimed(self, claims: tuple[KeyRange, ...] | list[KeyRange]) -> tuple[KeyRange, ...]:
        """The units for workers without a range: overlapping no claim, and not being split."""
        splitting = {s.unit for s in self.splits}
        return tuple(u for u in self.units if u not in splitting and not any(c.overlaps(u) for c in claims))


def check_tiling(units: tuple[KeyRange, ...], whole: KeyRange = FULL) -> None:
    """ValueError unless ``units`` are in order, contiguous, and cover exactly ``whole``."""
    if not units or units[0].start != whole.start or units[-1].end != whole.end or any(
        a.end + 1 != b.start for a, b in pairwise(units)
    ):
        raise ValueError(f"units {_text(units)} do not tile {whole}")


def _text(units: tuple[KeyRange, ...]) -> str:
    return "[" + ", ".join(map(str, units)) + "]"
