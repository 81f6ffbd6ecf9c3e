"""Cycle detection over parent links, limited to the ancestors of given shards."""

from __future__ import annotations

from typing import Callable, Iterable

from lineage.shard import shard_sort_key

ParentsOf = Callable[[str], "tuple[str, ...] | None"]


def is_backward_edge(child: str, parent: str) -> bool:
    """True if a parent link does not point to an older shard (Kinesis children have higher ids)."""
    return shard_sort_key(parent) >= shard_sort_key(child)


def find_cycle(starts: Iterable[str], parents_of: ParentsOf) -> tuple[str, ...] | None:
    """Return the shards of one cycle reachable upward from ``starts``, or None.

    Unknown (trimmed) parents end a path. Iterative, so deep histories cannot hit the recursion
    limit; each shard is expanded once across all starts.
    """

    done: set[str] = set()
    for root in starts:
        if root in done or parents_of(root) is None:
            continue
        cycle = _search_from(root, parents_of, done)
        if cycle is not None:
            return cycle
    return None


def _search_from(root: str, parents_of: ParentsOf, done: set[str]) -> tuple[str, ...] | None:
    path: list[str] = [root]
    on_path: dict[str, int] = {root: 0}
    pending: list[list[str]] = [list(parents_of(root) or ())]
    while path:
        if not pending[-1]:
            finished = path.pop()
            pending.pop()
            del on_path[finished]
            done.add(finished)
            continue
        parent = pending[-1].pop()
        if parent in on_path:
            return _rotate(tuple(path[on_path[parent] :]))
        grand_parents = parents_of(parent)
        if parent in done or grand_parents is None:
            continue
        on_path[parent] = len(path)
        path.append(parent)
        pending.append(list(grand_parents))
    return None


def _rotate(cycle: tuple[str, ...]) -> tuple[str, ...]:
    """Start the cycle at its lowest shard id so the error text is deterministic."""
    first = min(range(len(cycle)), key=lambda i: shard_sort_key(cycle[i]))
    return cycle[first:] + cycle[:first]
