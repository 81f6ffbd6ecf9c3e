"""The safety checker: no shard with two owners at the same simulated instant; counters never go back.

"Owner" in the sense that matters: a worker *believes* it holds a lease when
its coordinator's ``held()`` reports it, since that is what a consumer
processes. The checker re-reads a worker's ``held()`` after every step that
worker takes (any answer it received, any write it made) and, for every lease
newly believed, asks each other worker that believed it at its last look
whether ``held()`` *now*, at this instant, still reports it. ``held()`` can
only lose leases while its worker is not running (self-doubt expires it),
so this sees every overlap there is.

Each overlap is labelled by how the lease got from the old holder to the new
one (the last owner change the table saw, and whether the old owner's
heartbeat item still existed at that write):

* ``forced steal``: taken from a worker that was still registered (alive),
  and the taker's cycle reported it as a steal. The victim keeps it in
  ``held()`` until its next scan; the design accepts this window
  (checkpoints are fenced, delivery is at-least-once).
* ``taken from a live owner``: the same table transition, but not a steal:
  the taker's plan counted a live owner as dead. A bug.
* ``after expiry``: taken from a worker that had been declared dead. Its
  self-doubt must have emptied its ``held()`` first: an overlap here is a
  protocol bug.
* ``other``: any other way (e.g. released, then still believed): a bug.

Whether both holders' views were fresh (``view_is_fresh()``, what the
Consumer delivers under) is recorded too, and how long each overlap lasted.

Independently, every write to a lease item is watched: its ``leaseCounter``
must never decrease, and an owner change must increase it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from kinesis_src.leases.schema.keys import LEASE_PREFIX
from kinesis_src.leases.schema.lease_items import LEASE_COUNTER, LEASE_OWNER

FORCED_STEAL = "forced steal"
LIVE_OWNER = "taken from a live owner"
AFTER_EXPIRY = "after expiry"
OTHER = "other"


@dataclass(frozen=True)
class Violation:
    at: float
    kind: str  # "two holders", "counter went back", "owner changed, counter did not"
    shard_id: str
    detail: str
    how: str = OTHER  # for two holders: LIVE_OWNER (FORCED_STEAL once settled), AFTER_EXPIRY or OTHER
    both_fresh: bool = False
    holder: str = ""
    taker: str = ""


@dataclass
class _Overlap:
    start: float
    holders: frozenset[str]
    taker: str


class SafetyChecker:
    """Tracks who believes what; ``held_now(worker)`` re-reads a worker's held() at the current instant."""

    def __init__(self, held_now: Callable[[str], set[str]], fresh_now: Callable[[str], bool],
                 now: Callable[[], float], on_change: Callable[[], None],
                 registered: Callable[[str], bool]) -> None:
        self._held_now = held_now
        self._fresh_now = fresh_now
        self._registered = registered
        self._now = now
        self._on_change = on_change
        self.beliefs: dict[str, set[str]] = {}
        self.believers: dict[str, set[str]] = defaultdict(set)
        self.violations: list[Violation] = []
        self.checks = 0
        self.writes_checked = 0
        self._counters: dict[str, int] = {}
        self._handover: dict[str, str] = {}  # shard -> how its last owner change happened
        self._open: dict[str, _Overlap] = {}
        self.overlap_s: list[tuple[str, float, str, str]] = []  # (how, duration, taker, shard) of each ended

    # -- beliefs -------------------------------------------------------------------------

    def observe(self, worker: str) -> None:
        """After a step of ``worker``: update its beliefs, and check each new one against the others."""
        self.checks += 1
        new = self._held_now(worker)
        old = self.beliefs.get(worker, set())
        if new == old:
            return
        self._on_change()
        for shard in old - new:
            self._drop(shard, worker)
        self.beliefs[worker] = new
        for shard in new - old:
            for other in list(self.believers[shard]):
                self._check_pair(shard, worker, other)
            self.believers[shard].add(worker)

    def forget(self, worker: str) -> None:
        """A crashed or stopped process believes nothing any more."""
        for shard in self.beliefs.pop(worker, set()):
            self._drop(shard, worker)

    def _drop(self, shard: str, worker: str) -> None:
        self.believers[shard].discard(worker)
        overlap = self._open.get(shard)
        if overlap is not None and worker in overlap.holders:
            del self._open[shard]
            how = self._handover.get(shard, OTHER)
            self.overlap_s.append((how, self._now() - overlap.start, overlap.taker, shard))

    def _check_pair(self, shard: str, worker: str, other: str) -> None:
        current = self._held_now(other)
        if shard not in current:  # its belief lapsed (self-doubt) while it was not running
            self._refresh(other, current)
            return
        both_fresh = self._fresh_now(worker) and self._fresh_now(other)
        how = self._handover.get(shard, OTHER)
        self.violations.append(Violation(
            self._now(), "two holders", shard, f"{other} still holds it, {worker} took it", how, both_fresh,
            other, worker,
        ))
        self._open.setdefault(shard, _Overlap(self._now(), frozenset((other, worker)), worker))

    def _refresh(self, worker: str, current: set[str]) -> None:
        for shard in self.beliefs.get(worker, set()) - current:
            self._drop(shard, worker)
        self.beliefs[worker] = current

    # -- lease items -----------------------------------------------------------------------

    def on_write(self, pk: str, sk: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A write hook of the simulated table."""
        if not sk.startswith(LEASE_PREFIX) or new is None:
            return
        self.writes_checked += 1
        shard = sk[len(LEASE_PREFIX):]
        counter = int(new[LEASE_COUNTER]["N"])
        highest = self._counters.get(shard)
        if highest is not None and counter < highest:
            self.violations.append(Violation(self._now(), "counter went back", shard, f"{highest} -> {counter}"))
        before = None if old is None else _owner(old)
        if old is not None and before != _owner(new) and counter <= int(old[LEASE_COUNTER]["N"]):
            self.violations.append(Violation(
                self._now(), "owner changed, counter did not", shard,
                f"{before} -> {_owner(new)} at counter {counter}",
            ))
        if before is not None and _owner(new) not in (None, before):
            self._handover[shard] = LIVE_OWNER if self._registered(before) else AFTER_EXPIRY
        elif _owner(new) is not None and before is None:
            self._handover[shard] = OTHER
        self._counters[shard] = max(counter, highest or counter)

    # -- verdict ---------------------------------------------------------------------------

    def settle(self, stolen: set[tuple[str, str]]) -> None:
        """Relabel overlaps the taker's own cycle reported as steals (``(taker, shard)`` pairs)."""
        self.violations = [
            replace(v, how=FORCED_STEAL) if v.how == LIVE_OWNER and (v.taker, v.shard_id) in stolen else v
            for v in self.violations
        ]
        self.overlap_s = [
            (FORCED_STEAL if h == LIVE_OWNER and (t, s) in stolen else h, d, t, s) for h, d, t, s in self.overlap_s
        ]

    def count(self, kinds: Iterable[str], how: Iterable[str] | None = None) -> int:
        wanted, hows = set(kinds), None if how is None else set(how)
        return sum(1 for v in self.violations if v.kind in wanted and (hows is None or v.how in hows))

    @property
    def safe(self) -> bool:
        """No two holders at any instant, counters only increase."""
        return not self.violations

    @property
    def safe_but_steals(self) -> bool:
        """Every overlap was a forced steal's window (the design's at-least-once case)."""
        return all(v.kind == "two holders" and v.how == FORCED_STEAL for v in self.violations)

    def longest_overlap_s(self, how: str | None = None) -> float:
        return max((d for h, d, _, _ in self.overlap_s if how is None or h == how), default=0.0)


def _owner(item: dict[str, Any]) -> str | None:
    raw = item.get(LEASE_OWNER)
    return None if raw is None else raw["S"]
