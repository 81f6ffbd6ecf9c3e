"""One shard as ListShards describes it, as an immutable value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lineage.errors import (
    LineageConflictError,
    MalformedShardError,
    ParentConflictError,
)
from lineage.hashspace import HashRange, parse_hash_key

_STANDARD_ID = re.compile(r"shardId-([0-9]+)")


def shard_sort_key(shard_id: str) -> tuple[int, int, str]:
    """Order shard ids by their numeric suffix, unpadded ones too; other shapes sort after them."""
    match = _STANDARD_ID.fullmatch(shard_id)
    if match is None:
        return (1, 0, shard_id)
    return (0, int(match.group(1)), shard_id)


@dataclass(frozen=True)
class Shard:
    """What the graph remembers about one shard.

    ``parents``: 0, 1 (split) or 2 (merge) ids; ``ending_sequence_number``: None while listed open.
    """

    shard_id: str
    parents: tuple[str, ...]
    hash_range: HashRange
    starting_sequence_number: str
    ending_sequence_number: str | None = None

    @property
    def closed_by_listing(self) -> bool:
        """True if the listing itself reported an EndingSequenceNumber."""
        return self.ending_sequence_number is not None

    @classmethod
    def from_listing(cls, raw: Mapping[str, Any]) -> Shard:
        """Build a Shard from one element of ListShards' ``Shards`` list, validating it."""
        if not isinstance(raw, Mapping):
            raise MalformedShardError(None, "<shard>", raw, "expected a ListShards shard dict")
        shard_id = _shard_id(raw)
        return cls(
            shard_id=shard_id,
            parents=_parents(shard_id, raw),
            hash_range=_hash_range(shard_id, raw),
            starting_sequence_number=_sequence_number(shard_id, raw, "StartingSequenceNumber"),
            ending_sequence_number=_sequence_number(
                shard_id, raw, "EndingSequenceNumber", optional=True
            ),
        )

    def to_listing(self) -> dict[str, Any]:
        """The ListShards-shaped dict for this shard (inverse of from_listing)."""
        listing: dict[str, Any] = {"ShardId": self.shard_id}
        if self.parents:
            listing["ParentShardId"] = self.parents[0]
        if len(self.parents) == 2:
            listing["AdjacentParentShardId"] = self.parents[1]
        listing["HashKeyRange"] = {
            "StartingHashKey": str(self.hash_range.start),
            "EndingHashKey": str(self.hash_range.end),
        }
        sequence_range = {"StartingSequenceNumber": self.starting_sequence_number}
        if self.ending_sequence_number is not None:
            sequence_range["EndingSequenceNumber"] = self.ending_sequence_number
        listing["SequenceNumberRange"] = sequence_range
        return listing

    def merged_with(self, newer: Shard) -> Shard:
        """Combine two listings of a shard; the closed view wins, so their order never matters."""

        if newer.parents != self.parents:
            raise ParentConflictError(self.shard_id, "parents", self.parents, newer.parents)
        if newer.hash_range != self.hash_range:
            raise LineageConflictError(
                self.shard_id, "hash_range", str(self.hash_range), str(newer.hash_range)
            )
        if newer.starting_sequence_number != self.starting_sequence_number:
            raise LineageConflictError(
                self.shard_id,
                "starting_sequence_number",
                self.starting_sequence_number,
                newer.starting_sequence_number,
            )
        if newer.ending_sequence_number is None:
            return self
        if self.ending_sequence_number is None:
            return newer
        if newer.ending_sequence_number != self.ending_sequence_number:
            raise LineageConflictError(
                self.shard_id,
                "ending_sequence_number",
                self.ending_sequence_number,
                newer.ending_sequence_number,
            )
        return self


def _shard_id(raw: Mapping[str, Any]) -> str:
    shard_id = raw.get("ShardId")
    if not isinstance(shard_id, str) or not shard_id:
        raise MalformedShardError(None, "ShardId", shard_id, "expected a non-empty string")
    return shard_id


def _optional_id(shard_id: str, raw: Mapping[str, Any], field: str) -> str | None:
    value = raw.get(field)
    if value is not None and (not isinstance(value, str) or not value):
        raise MalformedShardError(shard_id, field, value, "expected a non-empty string or absent")
    return value


def _parents(shard_id: str, raw: Mapping[str, Any]) -> tuple[str, ...]:
    parent = _optional_id(shard_id, raw, "ParentShardId")
    adjacent = _optional_id(shard_id, raw, "AdjacentParentShardId")
    if adjacent is None:
        return () if parent is None else (parent,)
    if parent is None:
        raise MalformedShardError(
            shard_id, "AdjacentParentShardId", adjacent, "present without a ParentShardId"
        )
    if adjacent == parent:
        raise MalformedShardError(
            shard_id, "AdjacentParentShardId", adjacent, "same as ParentShardId"
        )
    return (parent, adjacent)


def _hash_range(shard_id: str, raw: Mapping[str, Any]) -> HashRange:
    hash_keys = raw.get("HashKeyRange")
    if not isinstance(hash_keys, Mapping):
        raise MalformedShardError(shard_id, "HashKeyRange", hash_keys, "expected a dict")
    bounds = []
    for field in ("StartingHashKey", "EndingHashKey"):
        value = hash_keys.get(field)
        try:
            bounds.append(parse_hash_key(value))
        except ValueError as exc:
            raise MalformedShardError(shard_id, f"HashKeyRange.{field}", value, str(exc)) from None
    start, end = bounds
    if start > end:
        raise MalformedShardError(
            shard_id,
            "HashKeyRange",
            {"StartingHashKey": str(start), "EndingHashKey": str(end)},
            "StartingHashKey is greater than EndingHashKey",
        )
    return HashRange(start, end)


def _sequence_number(
    shard_id: str, raw: Mapping[str, Any], field: str, optional: bool = False
) -> str | None:
    sequence_range = raw.get("SequenceNumberRange")
    if not isinstance(sequence_range, Mapping):
        raise MalformedShardError(shard_id, "SequenceNumberRange", sequence_range, "expected a dict")
    value = sequence_range.get(field)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise MalformedShardError(
            shard_id, f"SequenceNumberRange.{field}", value, "expected a non-empty string"
        )
    return value
