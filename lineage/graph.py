"""ShardGraph: parent/child lineage of a Kinesis stream's shards.

Fed ListShards pages, it answers a parent-first reader: which shards are ready, open, own a key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import Any

from lineage import codec
from lineage.cycles import find_cycle, is_backward_edge
from lineage.errors import (
    LineageCycleError,
    MalformedShardError,
    NoOwnerError,
    UnknownShardError,
)
from lineage.hashspace import MAX_HASH_KEY, MIN_HASH_KEY, HashRange, check_tiling
from lineage.open_index import OpenRangeIndex
from lineage.readiness import parents_done
from lineage.shard import Shard, shard_sort_key


class ShardGraph:
    """Mutable, deterministic shard lineage of one stream.  Not thread-safe."""

    __hash__ = None  # type: ignore[assignment]  # mutable: equality by content only

    def __init__(self) -> None:
        self._shards: dict[str, Shard] = {}
        # Keyed by parent id, which may be unknown (trimmed or not listed yet).
        self._children: dict[str, set[str]] = {}
        # Known shards none of whose parents are known: ready unless drained.
        self._roots: set[str] = set()
        self._open: set[str] = set()
        self._open_index = OpenRangeIndex()
        # Parent links not pointing to an older id; while 0 no cycle is possible.
        self._backward_edges = 0
        self._max_shard_id: str | None = None
        self._max_sort_key: tuple[int, int, str] | None = None

    # ------------------------------------------------------------------ update

    def update(self, shards: Iterable[Mapping[str, Any] | Shard]) -> tuple[str, ...]:
        """Merge a page of ListShards ``Shards`` dicts (or Shard values) into the graph, atomically.

        Pages may come in any order, repeat or be stale. Returns the ids whose state changed (new,
        ended, or closed by a new child), sorted. Raises MalformedShardError, LineageConflictError
        or LineageCycleError; only :meth:`validate` checks tiling (a page may be mid-reshard).
        """
        staged = self._stage(self._parse_all(shards))
        new_ids = sorted((sid for sid in staged if sid not in self._shards), key=shard_sort_key)
        new_backward = _count_backward_edges(staged[sid] for sid in new_ids)
        if self._backward_edges + new_backward:
            self._check_no_cycle(staged, new_ids)
        self._backward_edges += new_backward
        return self._commit(staged, new_ids)

    @staticmethod
    def _parse_all(shards: Iterable[Mapping[str, Any] | Shard]) -> list[Shard]:
        if isinstance(shards, Mapping):
            raise MalformedShardError(
                None,
                "<shards>",
                shards,
                "update() takes an iterable of shard dicts; pass response['Shards'], "
                "not the response or a single shard",
            )
        return [item if isinstance(item, Shard) else Shard.from_listing(item) for item in shards]

    def _stage(self, incoming: list[Shard]) -> dict[str, Shard]:
        """Merge incoming records with known ones without touching the graph."""
        staged: dict[str, Shard] = {}
        for shard in incoming:
            sid = shard.shard_id
            current = staged.get(sid) or self._shards.get(sid)
            merged = shard if current is None else current.merged_with(shard)
            if merged is not current:
                staged[sid] = merged
        return staged

    def _check_no_cycle(self, staged: dict[str, Shard], new_ids: list[str]) -> None:
        """Search new shards' ancestors for a cycle; any new cycle passes through a new shard."""

        def parents_of(sid: str) -> tuple[str, ...] | None:
            shard = staged.get(sid) or self._shards.get(sid)
            return None if shard is None else shard.parents

        cycle = find_cycle(new_ids, parents_of)
        if cycle is not None:
            raise LineageCycleError(cycle)

    def _commit(self, staged: dict[str, Shard], new_ids: list[str]) -> tuple[str, ...]:
        for sid, shard in staged.items():
            self._shards[sid] = shard
        affected = set(staged)
        for sid in new_ids:
            affected.update(self._link_new(self._shards[sid]))
        changed = set(staged)
        for sid in affected:
            if self._refresh_open(sid) is False:
                changed.add(sid)
        return tuple(sorted(changed, key=shard_sort_key))

    def _link_new(self, shard: Shard) -> list[str]:
        """Index a newly added shard; return its known parents (their openness may change)."""
        sid = shard.shard_id
        for parent in shard.parents:
            self._children.setdefault(parent, set()).add(sid)
        known_parents = [parent for parent in shard.parents if parent in self._shards]
        if not known_parents:
            self._roots.add(sid)
        for child in self._children.get(sid, ()):
            self._roots.discard(child)
        sort_key = shard_sort_key(sid)
        if self._max_sort_key is None or sort_key > self._max_sort_key:
            self._max_shard_id, self._max_sort_key = sid, sort_key
        return known_parents

    def _refresh_open(self, sid: str) -> bool | None:
        """Sync the open index for one shard; True/False if it opened/closed, else None."""
        shard = self._shards[sid]
        now_open = shard.ending_sequence_number is None and not self._children.get(sid)
        if now_open == (sid in self._open):
            return None
        if now_open:
            self._open.add(sid)
            self._open_index.add(sid, shard.hash_range)
        else:
            self._open.discard(sid)
            self._open_index.remove(sid, shard.hash_range)
        return now_open

    # ----------------------------------------------------------------- queries

    def __contains__(self, shard_id: object) -> bool:
        return shard_id in self._shards

    def __len__(self) -> int:
        return len(self._shards)

    def __iter__(self) -> Iterator[str]:
        return iter(self.shard_ids())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardGraph):
            return NotImplemented
        return self._shards == other._shards

    def __repr__(self) -> str:
        return f"<ShardGraph shards={len(self._shards)} open={len(self._open)}>"

    def shard(self, shard_id: str) -> Shard:
        """The merged record for one shard."""
        try:
            return self._shards[shard_id]
        except KeyError:
            raise UnknownShardError(shard_id) from None

    def shard_ids(self) -> list[str]:
        return sorted(self._shards, key=shard_sort_key)

    def open_shards(self) -> list[str]:
        return sorted(self._open, key=shard_sort_key)

    def max_shard_id(self) -> str | None:
        """Highest shard id seen: the ExclusiveStartShardId for the next incremental listing."""
        return self._max_shard_id

    def parents(self, shard_id: str) -> tuple[str, ...]:
        """(ParentShardId, AdjacentParentShardId) as listed; parents may be unknown (trimmed)."""
        return self.shard(shard_id).parents

    def children(self, shard_id: str) -> tuple[str, ...]:
        self.shard(shard_id)
        return tuple(sorted(self._children.get(shard_id, ()), key=shard_sort_key))

    def is_open(self, shard_id: str) -> bool:
        """Open = no EndingSequenceNumber seen and no child seen; closing is permanent."""
        self.shard(shard_id)
        return shard_id in self._open

    def hash_range(self, shard_id: str) -> HashRange:
        return self.shard(shard_id).hash_range

    def starting_sequence_number(self, shard_id: str) -> str:
        return self.shard(shard_id).starting_sequence_number

    def ending_sequence_number(self, shard_id: str) -> str | None:
        return self.shard(shard_id).ending_sequence_number

    def ancestors(self, shard_id: str) -> tuple[str, ...]:
        """Known ancestors, sorted; trimmed (unknown) parents and their lines are left out."""
        return self._walk(shard_id, lambda sid: self._shards[sid].parents)

    def descendants(self, shard_id: str) -> tuple[str, ...]:
        """All shards descended from this one, sorted."""
        return self._walk(shard_id, lambda sid: tuple(self._children.get(sid, ())))

    def _walk(self, shard_id: str, step: Callable[[str], Iterable[str]]) -> tuple[str, ...]:
        self.shard(shard_id)
        seen: set[str] = set()
        todo = [shard_id]
        while todo:
            for nxt in step(todo.pop()):
                if nxt in self._shards and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return tuple(sorted(seen, key=shard_sort_key))

    def ready(self, drained: Iterable[str]) -> list[str]:
        """Shards that may be read now: not drained, and :func:`~lineage.readiness.parents_done`.

        Unknown (trimmed) parents count as drained. Never a history walk: the work is proportional
        to the smaller of the drained and undrained sides.
        """
        if isinstance(drained, str):
            raise TypeError("ready() takes a collection of drained shard ids, not one id")
        done = drained if isinstance(drained, AbstractSet) else set(drained)
        shards = self._shards
        result = [sid for sid in self._candidates(done) if parents_done(shards[sid].parents, shards, done)]
        return sorted(result, key=shard_sort_key)

    def _candidates(self, done: AbstractSet[str]) -> set[str]:
        """Undrained shards that might be ready: roots and children of the drained, or the rest."""
        if 2 * len(done) <= len(self._shards):
            child_sets = filter(None, map(self._children.get, done))
            candidates = set(chain(self._roots, chain.from_iterable(child_sets)))
            candidates.difference_update(done)
            return candidates
        return self._shards.keys() - done

    def owner(self, hash_key: int) -> str:
        """The open shard whose range holds ``hash_key``; NoOwnerError (a LookupError) if none."""
        if isinstance(hash_key, bool) or not isinstance(hash_key, int):
            raise TypeError(f"hash key must be int, got {type(hash_key).__name__}")
        if not MIN_HASH_KEY <= hash_key <= MAX_HASH_KEY:
            raise NoOwnerError(hash_key, "outside the hash key space 0..2**128-1")
        return self._open_index.owner(hash_key)

    def validate(self) -> None:
        """Raise HashSpaceError unless open shards tile the space; call after a complete listing."""

        check_tiling(self._open_index.ranges())

    # ------------------------------------------------------------ persistence

    def to_json(self) -> str:
        """Canonical JSON: equal graphs give identical text."""
        return codec.dumps(self._shards.values())

    @classmethod
    def from_json(cls, text: str | bytes) -> ShardGraph:
        """Rebuild a graph from to_json() output; raises LineageError on bad input."""
        graph = cls()
        graph.update(codec.loads(text))
        return graph


def _count_backward_edges(shards: Iterable[Shard]) -> int:
    return sum(is_backward_edge(s.shard_id, parent) for s in shards for parent in s.parents)
