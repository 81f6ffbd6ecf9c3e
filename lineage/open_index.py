"""Sorted index of open shards by hash range start, for O(log n) owner lookup."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterator

from lineage.errors import NoOwnerError
from lineage.hashspace import HashRange
from lineage.shard import shard_sort_key

_Entry = tuple[int, int, tuple[int, int, str], str]


class OpenRangeIndex:
    """Open shards sorted by (start, end, shard id); bisect and splice, never a re-sort."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._starts: list[int] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, shard_id: str, hash_range: HashRange) -> None:
        entry = _entry(shard_id, hash_range)
        position = bisect_left(self._entries, entry)
        if position < len(self._entries) and self._entries[position] == entry:
            return
        self._entries.insert(position, entry)
        self._starts.insert(position, hash_range.start)

    def remove(self, shard_id: str, hash_range: HashRange) -> None:
        entry = _entry(shard_id, hash_range)
        position = bisect_left(self._entries, entry)
        if position < len(self._entries) and self._entries[position] == entry:
            del self._entries[position]
            del self._starts[position]

    def ranges(self) -> Iterator[tuple[str, HashRange]]:
        """(shard id, range) pairs in hash order, as the tiling check needs them."""
        for start, end, _key, shard_id in self._entries:
            yield shard_id, HashRange(start, end)

    def owner(self, hash_key: int) -> str:
        """The open shard with the greatest start <= key, if its range holds the key.

        Exact in a valid tiling; with overlaps, a key only a wider, earlier range holds is unowned.
        """

        position = bisect_right(self._starts, hash_key) - 1
        if position < 0:
            detail = "no open shards" if not self._entries else "key is below every open range"
            raise NoOwnerError(hash_key, detail)
        start, end, _key, shard_id = self._entries[position]
        if hash_key > end:
            raise NoOwnerError(
                hash_key, f"nearest open shard {shard_id} covers only [{start}, {end}]"
            )
        return shard_id


def _entry(shard_id: str, hash_range: HashRange) -> _Entry:
    return (hash_range.start, hash_range.end, shard_sort_key(shard_id), shard_id)
