"""The Kinesis hash key space: 0 .. 2**128 - 1, inclusive on both ends.

Records go by MD5(partition key) or an explicit hash key; each open shard owns one range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from lineage.errors import HashSpaceError

MIN_HASH_KEY = 0
MAX_HASH_KEY = 2**128 - 1

_DECIMAL = re.compile(r"[0-9]+")


@dataclass(frozen=True, order=True)
class HashRange:
    """An inclusive range of hash keys, as Kinesis reports it in HashKeyRange."""

    start: int
    end: int

    def __post_init__(self) -> None:
        # Values are validated here so no HashRange in the graph can be nonsense.
        for name, value in (("start", self.start), ("end", self.end)):
            if type(value) is not int:
                raise TypeError(f"HashRange.{name} must be int, got {type(value).__name__}")
            if not MIN_HASH_KEY <= value <= MAX_HASH_KEY:
                raise ValueError(f"HashRange.{name} {value} is outside 0..2**128-1")
        if self.start > self.end:
            raise ValueError(f"HashRange start {self.start} > end {self.end}")

    def __contains__(self, hash_key: object) -> bool:
        return isinstance(hash_key, int) and self.start <= hash_key <= self.end

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}]"

    @property
    def size(self) -> int:
        """Number of hash keys in the range (ranges are inclusive, so never 0)."""
        return self.end - self.start + 1

    def is_adjacent_to(self, other: HashRange) -> bool:
        """True if the two ranges touch without overlapping (the merge precondition)."""
        return self.end + 1 == other.start or other.end + 1 == self.start

    def overlaps(self, other: HashRange) -> bool:
        return self.start <= other.end and other.start <= self.end


def parse_hash_key(raw: object) -> int:
    """A HashKeyRange bound (a decimal string, or an int) as an int; ValueError with the reason."""

    if isinstance(raw, bool):
        raise ValueError("expected a decimal integer string, got a bool")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        if not _DECIMAL.fullmatch(raw):
            raise ValueError("expected a decimal integer string")
        value = int(raw)
    else:
        raise ValueError(f"expected a decimal integer string, got {type(raw).__name__}")
    if not MIN_HASH_KEY <= value <= MAX_HASH_KEY:
        raise ValueError("outside the hash key space 0..2**128-1")
    return value


Overlap = tuple[str, HashRange, str, HashRange]


def tiling_problems(
    ordered: Iterable[tuple[str, HashRange]],
) -> tuple[tuple[HashRange, ...], tuple[Overlap, ...]]:
    """Gaps and overlaps in ranges sorted by start; a range nested in an earlier one overlaps."""
    gaps: list[HashRange] = []
    overlaps: list[Overlap] = []
    next_free = MIN_HASH_KEY
    widest: tuple[str, HashRange] | None = None
    for shard_id, hash_range in ordered:
        if hash_range.start > next_free:
            gaps.append(HashRange(next_free, hash_range.start - 1))
        elif widest is not None and hash_range.start < next_free:
            overlaps.append((widest[0], widest[1], shard_id, hash_range))
        if hash_range.end + 1 > next_free:
            next_free = hash_range.end + 1
            widest = (shard_id, hash_range)
    if next_free <= MAX_HASH_KEY:
        gaps.append(HashRange(next_free, MAX_HASH_KEY))
    return tuple(gaps), tuple(overlaps)


def check_tiling(ordered: Iterable[tuple[str, HashRange]]) -> None:
    """Raise HashSpaceError unless the ranges cover 0..2**128-1 exactly once."""
    gaps, overlaps = tiling_problems(ordered)
    if gaps or overlaps:
        raise HashSpaceError(gaps, overlaps)
