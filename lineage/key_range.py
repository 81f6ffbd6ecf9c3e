"""Sticky hash-key ranges: a reader's fixed slice of the 128-bit hash space.

Unlike a shard's, it survives reshards (docs/consumer.md, "Sticky key ranges").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from lineage.errors import KeyRangeError
from lineage.hashspace import MAX_HASH_KEY, MIN_HASH_KEY, HashRange

_BOUNDS = re.compile(r"\s*([0-9]+)\s*-\s*([0-9]+)\s*")
_SLICE = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*")
SPACE_SIZE = MAX_HASH_KEY - MIN_HASH_KEY + 1


@dataclass(frozen=True, order=True)
class KeyRange:
    """An inclusive slice ``start..end`` of the hash key space 0..2**128-1."""

    start: int
    end: int

    def __post_init__(self) -> None:
        try:
            HashRange(self.start, self.end)  # one validation for both kinds of range
        except (TypeError, ValueError) as exc:
            raise KeyRangeError(f"invalid key range {self.start!r}-{self.end!r}: {exc}") from None

    @classmethod
    def full(cls) -> KeyRange:
        return cls(MIN_HASH_KEY, MAX_HASH_KEY)

    @classmethod
    def slice(cls, index: int, count: int) -> KeyRange:
        """Slice ``index`` of ``count`` contiguous slices of the space, sizes within one key."""
        if type(count) is not int or count < 1:
            raise KeyRangeError(f"slice count must be an integer >= 1, got {count!r}")
        if type(index) is not int or not 0 <= index < count:
            raise KeyRangeError(f"slice index must be 0..{count - 1} for {count} slices, got {index!r}")
        return cls(_boundary(index, count), _boundary(index + 1, count) - 1)

    @classmethod
    def parse(cls, text: str, option: str = "hashKeyRange") -> KeyRange:
        """Parse ``"START-END"`` (decimal, inclusive) or ``"i/n"`` (slice i of n), naming ``option`` on error."""
        if not isinstance(text, str):
            raise KeyRangeError(f"{option} must be a string, got {type(text).__name__}")
        try:
            if match := _SLICE.fullmatch(text):
                return cls.slice(int(match.group(1)), int(match.group(2)))
            if match := _BOUNDS.fullmatch(text):
                return cls(int(match.group(1)), int(match.group(2)))
        except KeyRangeError as exc:
            raise KeyRangeError(f"{option}={text!r}: {exc}") from None
        raise KeyRangeError(
            f"{option}={text!r} is not a key range: use 'START-END' (decimal hash keys, inclusive, "
            f"within 0-{MAX_HASH_KEY}) or 'i/n' (slice i of n equal slices, 0 <= i < n)"
        )

    @property
    def hash_range(self) -> HashRange:
        return HashRange(self.start, self.end)

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, hash_key: object) -> bool:
        return isinstance(hash_key, int) and self.start <= hash_key <= self.end

    def overlaps(self, other: KeyRange | HashRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def covers(self, other: KeyRange | HashRange) -> bool:
        """True if every hash key of ``other`` is in this range (a shard read without filtering)."""
        return self.start <= other.start and other.end <= self.end

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"


def _boundary(index: int, count: int) -> int:
    """Where slice ``index`` of ``count`` starts; ``_boundary(count, count)`` is one past the space."""
    size, extra = divmod(SPACE_SIZE, count)
    return MIN_HASH_KEY + index * size + min(index, extra)


def hash_key_of(partition_key: str, explicit_hash_key: str | int | None = None) -> int:
    """The hash key a record is routed by: its explicit hash key if given, else MD5(partition key).

    GetRecords omits a plain record's ExplicitHashKey, so for those the MD5 is not where Kinesis
    placed them (docs/consumer.md, "Sticky key ranges").
    """

    if explicit_hash_key is not None and explicit_hash_key != "":
        return int(explicit_hash_key)
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8")).digest(), "big")
