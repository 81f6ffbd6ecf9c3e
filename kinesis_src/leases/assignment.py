"""Balancing (pure): which leases one worker takes, steals or sheds this cycle.

Leases move gracefully (shed, handed over); a forced steal, which redelivers records and which the
KCL relies on, is the fallback here. Rules: docs/leases.md, "Assignment"."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from lineage import shard_sort_key
from lineage.readiness import parents_done

from .model import Lease


@dataclass(frozen=True)
class AssignmentPlan:
    """What one worker should do this cycle."""

    take: tuple[Lease, ...] = ()
    steal: tuple[Lease, ...] = ()
    release: tuple[Lease, ...] = ()
    assignable: int = 0
    workers: int = 1
    hand_to: tuple[tuple[str, str], ...] = ()  # (shard id, worker): releases that hand a lease to a starving worker

    @property
    def empty(self) -> bool:
        return not (self.take or self.steal or self.release)


def assignable(leases: Sequence[Lease], preserve_shard_order: bool = True) -> list[Lease]:
    """The leases that may be taken, in the given order: not finished, and (parent-first) ready by
    lineage's rule: every parent's lease is at SHARD_END, or gone (trimmed, cleaned up)."""
    ended = {lease.shard_id for lease in leases if lease.is_shard_end}
    if not preserve_shard_order:
        return [lease for lease in leases if lease.shard_id not in ended]
    known = {lease.shard_id for lease in leases}
    return [lease for lease in leases
            if lease.shard_id not in ended and parents_done(lease.parent_shard_ids, known, ended)]


def is_assignable(lease: Lease, by_id: Mapping[str, Lease], preserve_shard_order: bool = True) -> bool:
    """Whether one lease of ``by_id`` is :func:`assignable` (a pass over ``by_id``: for many, ask that)."""
    return any(ready is lease for ready in assignable(list(by_id.values()), preserve_shard_order))


def _order(lease: Lease) -> tuple[int, int, str]:
    return shard_sort_key(lease.shard_id)


def plan_assignment(
    me: str,
    leases: Iterable[Lease],
    live_workers: Collection[str],
    *,
    preserve_shard_order: bool = True,
    max_steals: int = 1,
    weights: Mapping[str, float] | None = None,
) -> AssignmentPlan:
    """Decide takes, steals and releases for worker ``me``; no I/O. Owners not in
    ``live_workers`` are dead: their leases go first. A worker's load is the sum of its leases'
    ``weights`` (:func:`~.throughput.lease_weights`; without them, floor(N/W) to ceil(N/W) leases
    each). A move of weight w needs a load gap of 2w (plus ``HYSTERESIS`` of the mean load with
    weights), so none is undone while weights stand still (docs/leases.md, "Assignment")."""
    all_leases = list(leases)
    workers = set(live_workers) | {me}
    ready = sorted(assignable(all_leases, preserve_shard_order), key=_order)
    ready_ids = {l.shard_id for l in ready}
    scale = _Scale.of(ready, len(workers), weights)
    closed = {p for l in all_leases for p in l.parent_shard_ids}
    load: dict[str, list[Lease]] = {worker: [] for worker in workers}
    for lease in ready:
        if lease.owner in load:
            load[lease.owner].append(lease)
    mine = _movable_last(load[me], closed)
    blocked = [l for l in all_leases if l.owner == me and l.shard_id not in ready_ids]
    surplus = _surplus(mine, scale)
    loads = {w: scale.total(ls) for w, ls in load.items()}
    if surplus:
        return AssignmentPlan(
            release=tuple(blocked + surplus), assignable=len(ready), workers=len(workers),
            hand_to=_takers_of(surplus, loads, scale),
        )
    starving = sorted((x for x in workers if scale.starving(loads[x])), key=lambda x: (loads[x], x))
    takers = _takers(me, workers, loads, scale, starving)
    dead_owned = [l for l in ready if l.owner is not None and l.owner not in workers]
    unowned = [l for l in ready if l.owner is None]
    free = _by_preference(me, takers, dead_owned) + _by_preference(me, takers, unowned)  # dead owners' first
    dealt = _dealt(me, (dead_owned, unowned), starving, loads, scale) if starving else []
    take = _floor_first_takes(me, dealt, free, loads[me], scale, starving)
    held = loads[me] + scale.total(take)
    release = list(blocked)
    steal: tuple[Lease, ...] = ()
    hand_to: tuple[tuple[str, str], ...] = ()
    if not free and starving and me not in starving:
        gifts = _hand_overs(me, load, closed, loads, scale)  # gracefully, instead of waiting to be stolen from
        release += [lease for lease, _ in gifts]
        hand_to = tuple((lease.shard_id, taker) for lease, taker in gifts)
    elif scale.starving(held) and len(take) == len(free):
        steal = _steals(me, load, closed, held, scale, max_steals)
    return AssignmentPlan(tuple(take), steal, tuple(release), len(ready), len(workers), hand_to)


def home_index(shard_id: str, workers: int) -> int:
    """Which of ``workers`` (sorted by id) a free lease is homed on: a stable hash of its shard id."""
    return zlib.crc32(shard_id.encode()) % workers


def _by_preference(me: str, workers: Collection[str], free: Sequence[Lease]) -> list[Lease]:
    """The order in which ``me`` tries free leases, so that workers seldom race for one: its own
    homed leases (:func:`home_index` over the ``workers`` that will take) in shard order, then the
    others' from the tail, the next worker's first (docs/leases.md, "Assignment", "Staggered takes")."""
    ranked = sorted(workers)
    mine, count = ranked.index(me), len(ranked)
    keyed = []
    for position, lease in enumerate(free):
        offset = (home_index(lease.shard_id, count) - mine) % count
        keyed.append(((0, position) if offset == 0 else (offset, -position), lease))
    keyed.sort(key=lambda pair: pair[0])
    return [lease for _, lease in keyed]


HYSTERESIS = 0.1  # with measured weights: a move needs this fraction of the mean worker load as extra gap


@dataclass(frozen=True)
class _Scale:
    """Lease weights and the means the rules compare with (count mode: every weight 1, no margin)."""

    weights: Mapping[str, float]
    mean_load: float  # M: total weight per worker
    mean_lease: float  # u: total weight per lease
    margin: float

    @classmethod
    def of(cls, ready: Sequence[Lease], workers: int, weights: Mapping[str, float] | None) -> _Scale:
        if weights is None:
            return cls({}, len(ready) / workers, 1.0, 0.0)
        total = sum(weights.get(l.shard_id, 1.0) for l in ready)
        mean_load = total / workers
        return cls(weights, mean_load, total / len(ready) if ready else 1.0, HYSTERESIS * mean_load)

    def of_lease(self, lease: Lease) -> float:
        return self.weights.get(lease.shard_id, 1.0)

    def total(self, leases: Iterable[Lease]) -> float:
        return sum(self.of_lease(l) for l in leases)

    def starving(self, load: float) -> bool:
        return load + self.mean_lease <= self.mean_load + 1e-9

    def can_move(self, lease: Lease, giver: float, taker: float) -> bool:
        """The gap rule: after the move the taker is still no more loaded than the giver (plus margin)."""
        return 2 * self.of_lease(lease) + self.margin <= giver - taker + 1e-9


def _surplus(mine: Sequence[Lease], scale: _Scale) -> list[Lease]:
    """What to shed: leases (from the tail) without which this worker is still at or above M."""
    load = scale.total(mine)
    shed = []
    for lease in reversed(mine):
        if load - scale.of_lease(lease) >= scale.mean_load + scale.margin - 1e-9:
            shed.append(lease)
            load -= scale.of_lease(lease)
    return shed[::-1]


def _takers(me: str, workers: Collection[str], loads: Mapping[str, float], scale: _Scale,
            starving: Sequence[str]) -> set[str]:
    """Who will want free leases, over whom they are homed: the starving workers while another one
    starves (the others take none, :func:`_floor_first_takes`), else those below the mean."""
    if any(w != me for w in starving):
        return set(starving) | {me}
    return {w for w in workers if loads[w] < scale.mean_load - 1e-9} | {me}


def _dealt(me: str, free: Iterable[Sequence[Lease]], starving: Sequence[str], loads: Mapping[str, float],
           scale: _Scale) -> list[Lease]:
    """The free leases dealt to ``me`` while workers starve, alike for every worker sharing the
    view: each to its home among the starving while that keeps it at most M (count: floor), the
    rest to the least loaded with room, starving first (count: up to ceil); dead owners' first."""
    ranked = sorted(starving)
    now = dict(loads)
    mine: list[Lease] = []

    def give(worker: str, lease: Lease) -> None:
        now[worker] += scale.of_lease(lease)
        if worker == me:
            mine.append(lease)

    def fits(worker: str, lease: Lease) -> bool:
        return now[worker] + scale.of_lease(lease) <= scale.mean_load + 1e-9

    def below(worker: str) -> bool:
        return now[worker] < scale.mean_load - 1e-9

    for group in free:
        left = []
        for lease in group:
            home = ranked[home_index(lease.shard_id, len(ranked))]
            if fits(home, lease):
                give(home, lease)
            else:
                left.append(lease)
        for lease in left:
            able = ([w for w in ranked if fits(w, lease)] or [w for w in ranked if below(w)]
                    or [w for w in now if below(w)])
            if able:
                give(min(able, key=lambda w: (now[w], w)), lease)
    return mine


def _floor_first_takes(me: str, dealt: Sequence[Lease], free: Sequence[Lease], load: float, scale: _Scale,
                       starving: Sequence[str]) -> list[Lease]:
    """The leases dealt to ``me`` (:func:`_dealt`), then free ones in its order of preference:
    only up to M (count: floor) while another worker starves, else while below M. A starving
    worker that finds none within M (weights) takes anyway, rather than leave a heavy lease free."""
    others_starve = any(w != me for w in starving)
    dealt_ids = {l.shard_id for l in dealt}
    rest = [l for l in free if l.shard_id not in dealt_ids]
    take = list(dealt) + _takes(rest, load + scale.total(dealt), scale, strict=others_starve)
    if not take and others_starve and me in starving:
        take = _takes(free, load, scale, strict=False)
    return take


def _takes(free: Sequence[Lease], load: float, scale: _Scale, strict: bool) -> list[Lease]:
    """Free leases to take: while below M, or (``strict``: another worker starves) while staying at most M."""
    take = []
    for lease in free:
        weight = scale.of_lease(lease)
        if (load + weight > scale.mean_load + 1e-9) if strict else (load >= scale.mean_load - 1e-9):
            if strict:
                continue
            break
        take.append(lease)
        load += weight
    return take


def _movable_last(leases: Sequence[Lease], closed: set[str]) -> list[Lease]:
    """Draining closed shards first, then open ones by id: the tail is what to give away."""
    return sorted(leases, key=lambda l: (l.shard_id not in closed, _order(l)))


def _gift(
    load: Mapping[str, Sequence[Lease]], closed: set[str], thief: str, loads: Mapping[str, float], scale: _Scale,
    *, draining_too: bool = False,
) -> tuple[str, Lease] | None:
    """The most loaded worker (ties: highest id) that can give the thief a lease by the gap rule,
    and its heaviest such lease, newest first. Open leases only (a draining parent would only be
    re-read), but a hand-over (``draining_too``) falls back to a draining one, lest one starve."""
    def giftable(worker: str, open_only: bool) -> list[Lease]:
        leases = _movable_last(load[worker], closed)
        return [l for l in leases if (not open_only or l.shard_id not in closed)
                and scale.can_move(l, loads[worker], loads[thief])]

    for open_only in (True, False) if draining_too else (True,):
        able = [w for w in load if w != thief and giftable(w, open_only)]
        if able:
            victim = max(able, key=lambda w: (loads[w], w))
            options = giftable(victim, open_only)
            best = max(range(len(options)), key=lambda i: (scale.of_lease(options[i]), i))
            return victim, options[best]
    return None


def _hand_overs(
    me: str, load: Mapping[str, Sequence[Lease]], closed: set[str], loads: Mapping[str, float], scale: _Scale,
) -> list[tuple[Lease, str]]:
    """What ``me`` hands over this cycle: every starving worker is served in the same round, the
    most starving (ties: lowest id) first, from the most loaded worker able to give (:func:`_gift`),
    each move counted. Every worker sharing the view computes the same moves and makes its own."""
    owned = {w: list(ls) for w, ls in load.items()}
    now = dict(loads)
    mine: list[tuple[Lease, str]] = []
    while True:
        hungry = [w for w in owned if scale.starving(now[w])]
        if not hungry:
            return mine
        taker = min(hungry, key=lambda w: (now[w], w))
        gift = _gift(owned, closed, taker, now, scale, draining_too=True)
        if gift is None:  # the most starving worker has the widest gap: nobody else can be served either
            return mine
        giver, lease = gift
        owned[giver].remove(lease)
        owned[taker].append(lease)
        weight = scale.of_lease(lease)
        now[giver] -= weight
        now[taker] += weight
        if giver == me:
            mine.append((lease, taker))


def _takers_of(shed: Sequence[Lease], loads: Mapping[str, float], scale: _Scale) -> tuple[tuple[str, str], ...]:
    """Who a shed lease is for: the most starving worker at that point (none while nobody starves)."""
    now = dict(loads)
    named = []
    for lease in shed:
        hungry = [w for w in now if scale.starving(now[w])]
        if not hungry:
            break
        taker = min(hungry, key=lambda w: (now[w], w))
        now[taker] += scale.of_lease(lease)
        named.append((lease.shard_id, taker))
    return tuple(named)


def _steals(
    me: str, load: Mapping[str, Sequence[Lease]], closed: set[str], held: float, scale: _Scale, max_steals: int
) -> tuple[Lease, ...]:
    """Take open leases from the most loaded worker while the gap rule allows and we starve."""
    owned = {w: list(ls) for w, ls in load.items()}
    loads = {w: scale.total(ls) for w, ls in owned.items()}
    loads[me] = held
    steals: list[Lease] = []
    while scale.starving(loads[me]) and len(steals) < max_steals:
        gift = _gift(owned, closed, me, loads, scale)
        if gift is None:
            break
        victim, lease = gift
        owned[victim].remove(lease)
        weight = scale.of_lease(lease)
        loads[victim] -= weight
        loads[me] += weight
        steals.append(lease)
    return tuple(steals)
