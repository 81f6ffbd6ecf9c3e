"""Walks over the shard lineage for the Spark driver, no I/O: ranks, ancestors, implied drains."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping

from lineage import KeyRange, ShardGraph

from .frontier import Frontier
from .offsets import Plan


def shards_in_order(graph: ShardGraph, key_range: KeyRange | None = None) -> list[str]:
    """Every listed shard, parents before children; with ``key_range`` only those overlapping it."""
    rank = lineage_rank(graph)
    shards = sorted(graph.shard_ids(), key=lambda s: (rank[s], s))
    if key_range is None:
        return shards
    return [s for s in shards if key_range.overlaps(graph.hash_range(s))]


def compact_drained(plan: Plan, graph: ShardGraph) -> Plan:
    """Keep only the drained shards the lineage does not imply; forget those no longer listed (trimmed).

    Every listed ancestor of a frontier or drained shard is drained (a shard joins the frontier
    only after its parents), so :func:`with_implied_drained` can add the rest back.
    """
    listed = {s for s in plan.drained if s in graph}
    kept = frozenset(listed - listed_ancestors(graph, [*plan.shards, *listed]))
    return plan if kept == plan.drained else replace(plan, drained=kept)


def with_implied_drained(frontier: Frontier, graph: ShardGraph) -> Frontier:
    """The frontier with every listed ancestor of its shards and drained shards counted as drained."""
    implied = listed_ancestors(graph, [*frontier.positions, *frontier.drained]) - frontier.positions.keys()
    if implied <= frontier.drained:
        return frontier
    return replace(frontier, drained=frontier.drained | implied)


class ImpliedDrained:
    """:func:`with_implied_drained`, remembered while the frontier, drained set and graph stay the same.

    Idle triggers ask about the same frontier again and again: the walk is done once.
    """

    def __init__(self) -> None:
        self._key: tuple[int, frozenset[str], frozenset[str]] | None = None
        self._drained: frozenset[str] = frozenset()
        self.computed = 0  # how often the walk ran (tests)

    def apply(self, frontier: Frontier, graph: ShardGraph) -> Frontier:
        key = (len(graph), frozenset(frontier.positions), frontier.drained)
        if key != self._key:
            self._key, self._drained = key, with_implied_drained(frontier, graph).drained
            self.computed += 1
        return frontier if self._drained == frontier.drained else replace(frontier, drained=self._drained)


def listed_ancestors(graph: ShardGraph, shard_ids: Iterable[str]) -> set[str]:
    """Known ancestors of the given shards, in one walk (each shard visited once, however many share it)."""
    seen: set[str] = set()
    todo = [s for s in shard_ids if s in graph]
    while todo:
        for parent in graph.parents(todo.pop()):
            if parent in graph and parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def lineage_rank(graph: ShardGraph) -> dict[str, int]:
    """Depth of each shard in the lineage (roots 1); sorting by it puts parents before children."""
    rank: dict[str, int] = {}
    for sid in graph.shard_ids():  # ids grow with lineage: parents are ranked first
        rank[sid] = 1 + max((rank.get(p, 0) for p in graph.parents(sid)), default=0)
    return rank


class LineageRanks:
    """:func:`lineage_rank` of the driver's graph, computed again only when the graph gained shards.

    Parents never change and the graph forgets no shard: ranks change only with the shard count.
    """

    def __init__(self) -> None:
        self._graph: ShardGraph | None = None
        self._size = -1
        self._rank: dict[str, int] = {}
        self.computed = 0  # how often the walk ran (tests, benchmarks)

    def of(self, graph: ShardGraph) -> Mapping[str, int]:
        if graph is not self._graph or len(graph) != self._size:
            self._graph, self._size, self._rank = graph, len(graph), lineage_rank(graph)
            self.computed += 1
        return self._rank
