"""Balancing (pure): which leases one worker takes, steals or sheds this cycle.

:func:`plan_assignment` gives each live worker between floor(N/W) and
ceil(N/W) of the N assignable leases: leases of dead workers first, then
unowned ones. Rebalancing between live workers is graceful: a worker above
ceil(N/W) sheds its surplus itself, and when a worker is below floor(N/W)
with nothing free, the most loaded worker hands one lease over (release
after its listener checkpoints). A forced steal (at most ``max_steals``,
from the most loaded worker) is the fallback. Forced steals are what make a
consumer see a record twice (at-least-once), so they are the exception
here, where the KCL relies on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from lineage import shard_sort_key

from .model import Lease


@dataclass(frozen=True)
class AssignmentPlan:
    """What one worker should do this cycle."""

    take: tuple[Lease, ...] = ()
    steal: tuple[Lease, ...] = ()
    release: tuple[Lease, ...] = ()
    assignable: int = 0
    workers: int = 1

    @property
    def empty(self) -> bool:
        return not (self.take or self.steal or self.release)


def is_assignable(lease: Lease, by_id: Mapping[str, Lease], preserve_shard_order: bool = True) -> bool:
    """Not finished, and (parent-first) every parent lease is SHARD_END or gone (trimmed, cleaned up)."""
    if lease.is_shard_end:
        return False
    if not preserve_shard_order:
        return True
    return all(p not in by_id or by_id[p].is_shard_end for p in lease.parent_shard_ids)


def _order(lease: Lease) -> tuple[int, int, str]:
    return shard_sort_key(lease.shard_id)


def plan_assignment(
    me: str,
    leases: Iterable[Lease],
    live_workers: Collection[str],
    *,
    preserve_shard_order: bool = True,
    max_steals: int = 1,
) -> AssignmentPlan:
    """Decide takes, steals and releases for worker ``me``; no I/O.

    Owners not in ``live_workers`` are dead: their leases are taken first.
    Fair share: between floor(N/W) and ceil(N/W) assignable leases each.
    While a worker is below floor, free leases are left to it (others take
    up to floor only), and if nothing is free the most loaded worker sheds
    one lease to it (graceful); stealing is the fallback. Closed shards that
    are still draining (a lease names them as parent) are never stolen, and
    handed over only when no open one is: moving them only re-reads them.
    """
    all_leases = list(leases)
    by_id = {lease.shard_id: lease for lease in all_leases}
    workers = set(live_workers) | {me}
    ready = sorted((l for l in all_leases if is_assignable(l, by_id, preserve_shard_order)), key=_order)
    ready_ids = {l.shard_id for l in ready}
    n, w = len(ready), len(workers)
    floor_share, ceil_share = n // w, -(-n // w)
    closed = {p for l in all_leases for p in l.parent_shard_ids}
    load: dict[str, list[Lease]] = {worker: [] for worker in workers}
    for lease in ready:
        if lease.owner in load:
            load[lease.owner].append(lease)
    mine = _movable_last(load[me], closed)
    blocked = [l for l in all_leases if l.owner == me and l.shard_id not in ready_ids]
    if len(mine) > ceil_share:
        return AssignmentPlan(release=tuple(blocked + mine[ceil_share:]), assignable=n, workers=w)
    free = [l for l in ready if l.owner is not None and l.owner not in workers]  # dead owners first
    free += [l for l in ready if l.owner is None]
    starving = sorted((x for x in workers if len(load[x]) < floor_share), key=lambda x: (len(load[x]), x))
    limit = floor_share if starving and me not in starving else ceil_share
    take = free[: max(0, limit - len(mine))]
    held = len(mine) + len(take)
    release = list(blocked)
    steal: tuple[Lease, ...] = ()
    if not free and starving and me not in starving:
        if _victim(load, closed, starving[0], len(load[starving[0]]), draining_too=True) == me:
            release.append(mine[-1])  # hand one over gracefully instead of waiting to be stolen from
    elif held < floor_share and len(take) == len(free):
        steal = _steals(me, load, closed, held, floor_share, max_steals)
    return AssignmentPlan(tuple(take), steal, tuple(release), n, w)


def _movable_last(leases: Sequence[Lease], closed: set[str]) -> list[Lease]:
    """Draining closed shards first, then open ones by id: the tail is what to give away."""
    return sorted(leases, key=lambda l: (l.shard_id not in closed, _order(l)))


def _victim(
    load: Mapping[str, Sequence[Lease]], closed: set[str], thief: str, held: int, *, draining_too: bool = False
) -> str | None:
    """The most loaded worker (ties: highest id) that can give the thief, holding ``held``, a lease
    and still have at least as many: one with at least two more.

    Only workers with an open lease qualify for a steal: a draining parent's
    new owner would only re-read from the last checkpoint. A graceful
    hand-off (``draining_too``) falls back to a draining parent when no able
    worker has an open lease; otherwise a worker starves for as long as the
    loaded workers hold only draining parents.
    """
    able = [w for w, ls in load.items() if w != thief and len(ls) - held >= 2]
    candidates = [w for w in able if any(l.shard_id not in closed for l in load[w])]
    if not candidates and draining_too:
        candidates = able
    return max(candidates, key=lambda w: (len(load[w]), w)) if candidates else None


def _steals(
    me: str, load: Mapping[str, Sequence[Lease]], closed: set[str], held: int, floor_share: int, max_steals: int
) -> tuple[Lease, ...]:
    """Take open leases from the most loaded worker while it has at least two more than us."""
    owned = {w: _movable_last(ls, closed) for w, ls in load.items()}
    steals: list[Lease] = []
    while held < floor_share and len(steals) < max_steals:
        victim = _victim(owned, closed, me, held)
        if victim is None:
            break
        steals.append(owned[victim].pop())  # its newest open shard
        held += 1
    return tuple(steals)
