"""The one set of leases a worker holds, with what its reader keeps per holding.

A holding whose SHARD_END write is in flight outlives its lease, let go but kept until the reader
detaches it (docs/architecture.md, "One held set"). Thread-safe: ``start()`` runs on threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Generic, TypeVar

from .model import Lease
from .throughput import RateMeter

H = TypeVar("H")


@dataclass(eq=False)
class Held(Generic[H]):
    """One shard: the lease held on it, what it delivered, when it was taken, and the reader's holding."""

    lease: Lease
    meter: RateMeter
    acquired_at: float
    holding: H | None = None
    kept: bool = True  # False: let go by the coordinator, kept only for the reader's holding


class HeldLeases(Generic[H]):
    """Shard id -> :class:`Held`. ``incarnation`` goes up when the worker learns it was declared dead:
    a take sent before that is not held (:meth:`~.ownership.Ownership.take`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.incarnation = 0
        self._entries: dict[str, Held[H]] = {}

    # -- the coordinator's side -----------------------------------------------------------

    def hold(self, lease: Lease, now: float, incarnation: int | None = None) -> bool:
        """Hold ``lease``; False, not held, if ``incarnation`` (the take's) is no longer the worker's. A
        holding still attached (an earlier one of the shard) stays for the reader to retire."""
        with self._lock:
            if incarnation is not None and incarnation != self.incarnation:
                return False
            before = self._entries.get(lease.shard_id)
            holding = None if before is None else before.holding
            self._entries[lease.shard_id] = Held(lease, RateMeter(now), now, holding)
            return True

    def new_incarnation(self) -> None:
        """The worker learnt it was declared dead: takes sent before now are not held."""
        with self._lock:
            self.incarnation += 1

    def lease(self, shard_id: str) -> Lease | None:
        entry = self._kept(shard_id)
        return None if entry is None else entry.lease

    def leases(self) -> dict[str, Lease]:
        """Every lease held now (a copy)."""
        with self._lock:
            return {shard_id: e.lease for shard_id, e in self._entries.items() if e.kept}

    def meter(self, shard_id: str) -> RateMeter | None:
        entry = self._kept(shard_id)
        return None if entry is None else entry.meter

    def acquired_at(self, shard_id: str) -> float:
        entry = self._kept(shard_id)
        return float("-inf") if entry is None else entry.acquired_at

    def update(self, lease: Lease, same_counter: bool = False) -> None:
        """The held lease as written or read now; with ``same_counter``, only if still held at its counter."""
        with self._lock:
            entry = self._kept(lease.shard_id)
            if entry is not None and (not same_counter or entry.lease.counter == lease.counter):
                entry.lease = lease

    def let_go(self, shard_id: str, counter: int | None = None) -> Lease | None:
        """Stop holding the shard (only the holding at ``counter``, if given); the lease let go, or None."""
        with self._lock:
            entry = self._kept(shard_id)
            if entry is None or (counter is not None and entry.lease.counter != counter):
                return None
            entry.kept = False
            if entry.holding is None:
                del self._entries[shard_id]
            return entry.lease

    def _kept(self, shard_id: str) -> Held[H] | None:
        with self._lock:
            entry = self._entries.get(shard_id)
            return entry if entry is not None and entry.kept else None

    # -- the reader's side -----------------------------------------------------------------

    def attach(self, shard_id: str, holding: H) -> None:
        """The reader's state of the holding of a held shard (replacing any earlier one)."""
        with self._lock:
            entry = self._kept(shard_id)
            if entry is None:
                raise RuntimeError(f"shard {shard_id} is not held: no holding can be attached to it")
            entry.holding = holding

    def holding(self, shard_id: str) -> H | None:
        with self._lock:
            entry = self._entries.get(shard_id)
            return None if entry is None else entry.holding

    def holdings(self) -> list[H]:
        with self._lock:
            return [e.holding for e in self._entries.values() if e.holding is not None]

    def detach(self, shard_id: str, holding: H) -> bool:
        """Retire ``holding`` if it is the shard's current one (an entry let go leaves with it); True if it was."""
        with self._lock:
            entry = self._entries.get(shard_id)
            if entry is None or entry.holding is not holding:
                return False
            entry.holding = None
            if not entry.kept:
                del self._entries[shard_id]
            return True
