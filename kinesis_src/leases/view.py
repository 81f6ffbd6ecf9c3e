"""What a coordinator reads each cycle: heartbeats always, leases only when they changed.

A writer that changes ownership bumps ``leaseChanges`` in its heartbeat; a cycle reads the leases
when that moved, and periodically. Why and costs: docs/leases.md, "Reading the table"."""

from __future__ import annotations

import random
import threading
from typing import Callable, Mapping

from ..in_place import run_sync
from .model import Lease, TableView, WorkerHeartbeat
from .table_calls import TableCalls
from .timing import LeaseTiming

Fingerprint = frozenset[tuple[str, str, int]]
REFRESH_JITTER = 0.25  # a periodic re-read comes 0-25 % early: workers started together do not read together


def fingerprint(workers: Mapping[str, WorkerHeartbeat]) -> Fingerprint:
    """Changes to the leases are announced here: a bump, or a worker appearing or going away."""
    return frozenset((w.worker_id, w.session, w.changes) for w in workers.values())


class ViewReader:
    """Reads one cycle's :class:`TableView`, with the lease items cached between announced changes
    for at most the (scaled) ``lease_refresh_interval_s``; ``partitions``: over how many keys the
    leases are spread. Not thread-safe: the coordinator's cycle is its only caller."""

    def __init__(self, table: TableCalls, timing: LeaseTiming, clock: Callable[[], float],
                 partitions: Callable[[], int] = lambda: 1, me: str = "") -> None:
        self.table = table
        self.me = me
        self.timing = timing
        self.clock = clock
        self.partitions = partitions
        self._leases: Mapping[str, Lease] = {}
        self._seen: Fingerprint | None = None
        self._read_at = float("-inf")
        self._current_at = float("-inf")
        self._lock = threading.Lock()
        self._invalid = True
        self._spread = 1.0  # this round's share of the refresh interval (jittered after every read)
        self.lease_reads = 0
        self.gap_s = 0.0  # the least time between two lease reads, for the fleet seen at the last read

    def read(self, force: bool = False) -> tuple[TableView, bool]:
        return run_sync(self.aread(force))

    async def aread(self, force: bool = False) -> tuple[TableView, bool]:
        """This cycle's view, and whether the lease items were read (not served from the cache). A
        lease read (:meth:`~.table.LeaseTable.scan`) returns heartbeats read after the leases, so no
        owner is judged by an older one; the fingerprint kept is the first heartbeat read's."""
        with self._lock:
            invalid, self._invalid = self._invalid, False  # an invalidate() from now on counts for the next read
        started = self.clock()
        workers = await self.table.list_workers()
        now, seen = self.clock(), fingerprint(workers)
        fleet = (len(self._leases), len(workers), self.partitions())
        age = now - self._read_at
        changed = invalid or seen != self._seen
        refresh = self.timing.refresh_s_for(*fleet) * self._spread
        self.gap_s = self.timing.lease_read_gap_s(*fleet)
        stale = age >= refresh or (changed and age >= self.gap_s) or self._named(workers)
        if changed and not stale and invalid:
            self.invalidate()  # too soon after the last read: read at the first cycle past the gap
        if force or stale:
            try:
                full = await self.table.scan()
            except BaseException:
                self.invalidate()
                raise
            self._leases, workers = full.leases, dict(full.workers)
            self._seen, self._read_at = seen, now
            self._spread = 1.0 - REFRESH_JITTER * random.random()
            self.lease_reads += 1
        if force or stale or not self._others_changed(seen):
            self._current_at = started
        return TableView(self._leases, workers), force or stale

    def _named(self, workers: Mapping[str, WorkerHeartbeat]) -> bool:
        """A new announcement names this worker (a steal's victim, a hand-over's taker, a worker
        asked for a lease): read now, whatever the gap, so each hand-over step takes one scan."""
        if not self.me or self._seen is None:
            return False
        return any(self.me in w.notify and (w.worker_id, w.session, w.changes) not in self._seen
                   for w in workers.values())

    def _others_changed(self, seen: Fingerprint) -> bool:
        """Another worker announced a change (or appeared, or went away) since the last lease read;
        this worker's own bumps do not count."""
        if self._seen is None:
            return True
        return {f for f in seen if f[0] != self.me} != {f for f in self._seen if f[0] != self.me}

    @property
    def current_at(self) -> float:
        """When the last read started whose view reflects every change others announced (local
        clock): one that saw an announcement and deferred the lease read does not count.
        :meth:`~.coordinator.LeaseCoordinator.view_is_fresh` dates the view by this."""
        return self._current_at

    @property
    def read_at(self) -> float:
        """When the cached lease items were read (local clock)."""
        return self._read_at

    def invalidate(self) -> None:
        """The caller changed leases itself (any thread): read them again next cycle, whether its
        announcement lands or not."""
        with self._lock:
            self._invalid = True
