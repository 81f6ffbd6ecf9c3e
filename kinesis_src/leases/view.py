"""What a coordinator reads each cycle: heartbeats always, leases only when they changed.

Reading every lease every cycle costs more than the table is worth on an
idle stream, and checkpoints change no owner. So a writer that changes
ownership bumps ``leaseChanges`` in its own heartbeat after its lease write
(:meth:`~.table.LeaseTable.heartbeat` with ``changed=True``); a cycle reads
the heartbeats first and the leases only when their fingerprint
``{worker: (session, leaseChanges)}`` moved, at least every
``lease_refresh_interval_s`` (:meth:`~.timing.LeaseTiming.refresh_s_for`),
and never closer than :meth:`~.timing.LeaseTiming.lease_read_gap_s`.

A missed announcement (a writer that died before bumping) is seen at the
periodic re-read; fencing never depended on the view. Costs and the full
argument: docs/leases.md, "Reading the table".
"""

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
    """Reads one cycle's :class:`TableView`, with the lease items cached between announced changes.

    ``timing`` bounds how old the cached leases may get
    (``lease_refresh_interval_s``, scaled with the fleet; 0: read them every
    cycle, as before this cache existed) and how often they are read.
    ``partitions`` says over how many partition keys the leases are spread.
    Not thread-safe: the coordinator's cycle is its only caller.
    """

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
        """This cycle's view, and whether the lease items were read (not served from the cache).

        A lease read is :meth:`~.table.LeaseTable.scan`, one Query of the
        partition: the ``shard#`` sort keys come before the ``worker#`` ones,
        so the heartbeats it returns were read after the leases, and every
        owner that was alive when its leases were read has its heartbeat in
        the view. (Judged by the first, earlier heartbeat read, a worker that
        registered and took leases in between would count as dead, its leases
        taken at once: found by the lease simulation.) The fingerprint kept
        is the first read's, taken before the leases.
        """
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
        """A new announcement names this worker: read now, whatever the gap.

        Named are the victim of a steal (it holds the lease until it reads it;
        within the gap that was up to 5.7 s at 10,000 shards and 100 workers,
        long enough for the thief to pass the lease on while the victim still
        held it), the recipient of a hand-over (the lease waits free until it
        reads) and the workers a starving one wants a lease from (they hand
        over only once they read its need): each step of a hand-over cost up to
        a gap (the simulation). These are rare, so this costs little.
        """
        if not self.me or self._seen is None:
            return False
        return any(self.me in w.notify and (w.worker_id, w.session, w.changes) not in self._seen
                   for w in workers.values())

    def _others_changed(self, seen: Fingerprint) -> bool:
        """Another worker announced a change (or appeared, or went away) since the last lease read.

        This worker's own bumps do not count: it made those changes itself.
        """
        if self._seen is None:
            return True
        return {f for f in seen if f[0] != self.me} != {f for f in self._seen if f[0] != self.me}

    @property
    def current_at(self) -> float:
        """When the last read started whose view reflects every change others announced (local clock).

        A read that saw no new announcement, or that read the leases, counts;
        one that saw an announcement and deferred the lease read
        (``lease_read_gap_s``) does not: an unread steal may be behind it.
        :meth:`~.coordinator.LeaseCoordinator.view_is_fresh` dates the view by this.
        """
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
