"""Test helper: a brute-force reshard simulator and reference answers for lineage tests.

The simulator plays a random history of splits and merges the way Kinesis
does (closing parents, creating higher-numbered children) and can produce the
ListShards listing as it looked after any step.  The reference functions answer
the graph's questions by linear scans over the listing, with no indexes, so
they are easy to trust.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from hypothesis import strategies as st

MAX_HASH_KEY = 2**128 - 1
_SEQUENCE_BASE = 49_590_000_000_000_000_000_000


def shard_id(number: int) -> str:
    return f"shardId-{number:012d}"


def listing(
    number: int,
    start: int,
    end: int,
    parents: tuple[int, ...] = (),
    ending: str | None = None,
    starting: str | None = None,
) -> dict[str, Any]:
    """A ListShards shard dict from small ints, for hand-written examples."""
    shard: dict[str, Any] = {"ShardId": shard_id(number)}
    if parents:
        shard["ParentShardId"] = shard_id(parents[0])
    if len(parents) > 1:
        shard["AdjacentParentShardId"] = shard_id(parents[1])
    shard["HashKeyRange"] = {"StartingHashKey": str(start), "EndingHashKey": str(end)}
    sequence = {"StartingSequenceNumber": starting or str(_SEQUENCE_BASE + number * 1000)}
    if ending is not None:
        sequence["EndingSequenceNumber"] = ending
    shard["SequenceNumberRange"] = sequence
    return shard


@dataclass
class SimShard:
    number: int
    start: int
    end: int
    parents: tuple[int, ...]
    created_at: int
    closed_at: int | None = None
    ending: str | None = None

    @property
    def sid(self) -> str:
        return shard_id(self.number)

    def as_listing(self, closed: bool) -> dict[str, Any]:
        return listing(self.number, self.start, self.end, self.parents, self.ending if closed else None)


@dataclass
class ReshardSimulator:
    """Kinesis resharding, step by step.  Step 0 is stream creation."""

    shards: list[SimShard] = field(default_factory=list)
    step: int = 0

    @classmethod
    def create(cls, boundaries: Iterable[int]) -> ReshardSimulator:
        """A stream whose initial shards start at 0 and at each boundary."""
        sim = cls()
        starts = [0, *sorted(boundaries)]
        ends = [b - 1 for b in starts[1:]] + [MAX_HASH_KEY]
        for start, end in zip(starts, ends):
            sim._new(start, end, ())
        return sim

    def _new(self, start: int, end: int, parents: tuple[int, ...]) -> SimShard:
        shard = SimShard(len(self.shards), start, end, parents, self.step)
        self.shards.append(shard)
        return shard

    def _close(self, shard: SimShard) -> None:
        shard.closed_at = self.step
        shard.ending = str(_SEQUENCE_BASE + shard.number * 1000 + 999)

    def open_in_hash_order(self) -> list[SimShard]:
        return sorted((s for s in self.shards if s.closed_at is None), key=lambda s: s.start)

    def split(self, shard: SimShard, at: int) -> None:
        """Split into [start, at-1] and [at, end]; requires start < at <= end."""
        assert shard.closed_at is None and shard.start < at <= shard.end
        self.step += 1
        self._close(shard)
        self._new(shard.start, at - 1, (shard.number,))
        self._new(at, shard.end, (shard.number,))

    def merge(self, left: SimShard, right: SimShard, right_is_parent: bool) -> None:
        """Merge two adjacent open shards; either may be named ParentShardId."""
        assert left.closed_at is None and right.closed_at is None and left.end + 1 == right.start
        self.step += 1
        self._close(left)
        self._close(right)
        pair = (right.number, left.number) if right_is_parent else (left.number, right.number)
        self._new(left.start, right.end, pair)

    def listings(self, at_step: int | None = None) -> list[dict[str, Any]]:
        """The complete listing as ListShards would return it after ``at_step``."""
        step = self.step if at_step is None else at_step
        return [
            s.as_listing(closed=s.closed_at is not None and s.closed_at <= step)
            for s in self.shards
            if s.created_at <= step
        ]

    def stale_listings(self) -> list[dict[str, Any]]:
        """Each closed shard as it was listed while still open."""
        return [s.as_listing(closed=False) for s in self.shards if s.closed_at is not None]

    def open_ids(self) -> list[str]:
        return [s.sid for s in self.shards if s.closed_at is None]

    def closed_ids(self) -> list[str]:
        return [s.sid for s in self.shards if s.closed_at is not None]


# --------------------------------------------------------------- strategies

_HASH_POINT = st.one_of(
    st.integers(1, 16),
    st.integers(1, MAX_HASH_KEY),
    st.integers(MAX_HASH_KEY - 16, MAX_HASH_KEY),
)


@st.composite
def histories(draw: st.DrawFn, max_initial: int = 8, max_ops: int = 40) -> ReshardSimulator:
    """Random initial tiling (1..max_initial shards) plus up to max_ops reshards."""
    count = draw(st.integers(1, max_initial))
    boundaries = draw(st.lists(_HASH_POINT, min_size=count - 1, max_size=count - 1, unique=True))
    sim = ReshardSimulator.create(boundaries)
    for _ in range(draw(st.integers(0, max_ops))):
        if not _random_reshard(draw, sim):
            break
    return sim


def _random_reshard(draw: st.DrawFn, sim: ReshardSimulator) -> bool:
    open_shards = sim.open_in_hash_order()
    splittable = [s for s in open_shards if s.end > s.start]
    kinds = (["split"] if splittable else []) + (["merge"] if len(open_shards) > 1 else [])
    if not kinds:
        return False
    if draw(st.sampled_from(kinds)) == "split":
        shard = draw(st.sampled_from(splittable))
        at = draw(st.one_of(st.just(shard.start + 1), st.just(shard.end), st.integers(shard.start + 1, shard.end)))
        sim.split(shard, at)
    else:
        index = draw(st.integers(0, len(open_shards) - 2))
        sim.merge(open_shards[index], open_shards[index + 1], draw(st.booleans()))
    return True


# ------------------------------------------------------ reference answers

def _parents_of(shard: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        shard[key] for key in ("ParentShardId", "AdjacentParentShardId") if shard.get(key)
    )


def reference_open(listings: list[dict[str, Any]]) -> set[str]:
    """Open = no EndingSequenceNumber and nobody names it as a parent."""
    named = {p for shard in listings for p in _parents_of(shard)}
    return {
        shard["ShardId"]
        for shard in listings
        if "EndingSequenceNumber" not in shard["SequenceNumberRange"] and shard["ShardId"] not in named
    }


def reference_owner(listings: list[dict[str, Any]], hash_key: int) -> str | None:
    """Linear scan over open shards."""
    open_ids = reference_open(listings)
    owners = [
        shard["ShardId"]
        for shard in listings
        if shard["ShardId"] in open_ids
        and int(shard["HashKeyRange"]["StartingHashKey"]) <= hash_key <= int(shard["HashKeyRange"]["EndingHashKey"])
    ]
    assert len(owners) <= 1, owners
    return owners[0] if owners else None


def reference_ready(listings: list[dict[str, Any]], drained: set[str]) -> list[str]:
    known = {shard["ShardId"] for shard in listings}
    return sorted(
        shard["ShardId"]
        for shard in listings
        if shard["ShardId"] not in drained
        and all(p in drained or p not in known for p in _parents_of(shard))
    )


def boundary_keys(listings: list[dict[str, Any]]) -> set[int]:
    """Every range start and end, their neighbours, and both ends of the space."""
    keys = {0, MAX_HASH_KEY}
    for shard in listings:
        for bound in shard["HashKeyRange"].values():
            value = int(bound)
            keys.update(k for k in (value - 1, value, value + 1) if 0 <= k <= MAX_HASH_KEY)
    return keys
