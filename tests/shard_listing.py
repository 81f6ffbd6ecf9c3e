"""ListShards entries for unit tests: shard i with a hash range, parents, and an end if closed.

Shard i's sequence numbers are 100(i+1) .. 100(i+1)+99, so a checkpoint can be
placed inside (or outside) a shard by number.
"""

from __future__ import annotations

from typing import Any


def sid(i: int) -> str:
    return f"shardId-{i:012d}"


def shard(i: int, lo: int, hi: int, parents: tuple[int, ...] = (), closed: bool = False) -> dict[str, Any]:
    """Shard i as ListShards lists it: ``parents`` are one (split) or two (merge) shard numbers."""
    out: dict[str, Any] = {
        "ShardId": sid(i),
        "HashKeyRange": {"StartingHashKey": str(lo), "EndingHashKey": str(hi)},
        "SequenceNumberRange": {"StartingSequenceNumber": str(100 * (i + 1))},
    }
    if parents:
        out["ParentShardId"] = sid(parents[0])
    if len(parents) == 2:
        out["AdjacentParentShardId"] = sid(parents[1])
    if closed:
        out["SequenceNumberRange"]["EndingSequenceNumber"] = str(100 * (i + 1) + 99)
    return out
