"""The two-phase steal: a starving worker asks a lease's holder to release it before forcing it.

The holder releases gracefully at its next cycle; the thief forces only ``failover_s`` after its
request was announced. Why that never overlaps a delivering holder: docs/leases.md, "Assignment"."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from .cycle_report import CycleReport
from .model import Lease, TableView
from .renewal import HeartbeatRenewal
from .timing import LeaseTiming

if TYPE_CHECKING:
    from .ownership import Ownership
    from .table_calls import TableCalls
    from .view import ViewReader

log = logging.getLogger(__name__)

STEAL_PATIENCE_RENEWALS = 1.5  # a wish to steal must last this many renewals before it is acted on


class RequestState(str, enum.Enum):
    WRITTEN = "written"  # on the lease item; the announcement naming the holder is not acknowledged yet
    ANNOUNCED = "announced"  # the holder was told: forced failover_s after ``announced_at`` unless released


@dataclass(frozen=True)
class StealRequest:
    """One request of this worker: the lease as requested (a forced steal is conditional on its owner
    and counter), the ticket of the announcement that tells its holder, and when this worker first saw
    that announcement acknowledged (local clock)."""

    lease: Lease
    ticket: int
    announced_at: float | None = None

    @property
    def state(self) -> RequestState:
        return RequestState.WRITTEN if self.announced_at is None else RequestState.ANNOUNCED

    def due(self, now: float, failover_s: float) -> bool:
        return self.announced_at is not None and now - self.announced_at >= failover_s


class StealBook:
    """The thief's open requests, by shard id (no I/O)."""

    def __init__(self) -> None:
        self.open: dict[str, StealRequest] = {}
        self.incarnation = 0  # the coordinator's incarnation in which the open requests were written

    def keep_incarnation(self, incarnation: int) -> None:
        """Forget every request if this worker was declared dead since they were written: their
        announcements may have reached the holder while no heartbeat item named this worker."""
        if incarnation != self.incarnation:
            self.clear()
            self.incarnation = incarnation

    def add(self, request: StealRequest) -> None:
        self.open[request.lease.shard_id] = request

    def track(self, leases: Mapping[str, Lease], announced: int, now: float) -> None:
        """Forget requests whose lease changed hands (released, taken, ended, deleted); date the
        announcements acknowledged since (``announced``: the renewal's last announced ticket)."""
        for shard_id, request in list(self.open.items()):
            current = leases.get(shard_id)
            if current is None or (current.owner, current.counter) != (request.lease.owner, request.lease.counter):
                del self.open[shard_id]
            elif request.announced_at is None and announced >= request.ticket:
                self.open[shard_id] = replace(request, announced_at=now)

    def due(self, now: float, failover_s: float) -> list[StealRequest]:
        """Requests to force now; they leave the book."""
        due = [r for r in self.open.values() if r.due(now, failover_s)]
        for request in due:
            del self.open[request.lease.shard_id]
        return due

    def clear(self) -> None:
        self.open.clear()


def requested_of(me: str, held: Mapping[str, Lease], view: TableView) -> list[tuple[Lease, str]]:
    """Held leases another live (registered) worker asked ``me`` to release, with the thief: those
    the view shows held by ``me`` at the counter held (an older view says nothing)."""
    asked = []
    for shard_id, lease in held.items():
        current = view.leases.get(shard_id)
        if current is None or current.owner != me or current.counter != lease.counter:
            continue
        thief = current.steal_requested_by
        if thief is not None and thief != me and thief in view.workers:
            asked.append((lease, thief))
    return asked


class Steals:
    """A starving worker's steals (patience, requests, forcing) and the honouring of others' requests,
    through the worker's :class:`~.ownership.Ownership`."""

    def __init__(self, worker_id: str, timing: LeaseTiming, clock: Callable[[], float], *, ownership: Ownership,
                 calls: TableCalls, renewal: HeartbeatRenewal, views: ViewReader) -> None:
        self.worker_id = worker_id
        self.timing = timing
        self.clock = clock
        self.ownership = ownership
        self.calls = calls
        self.renewal = renewal
        self.views = views
        self.book = StealBook()  # this worker's open requests
        self.wanted_since: float | None = None
        self.need_announced_at = float("-inf")  # when this worker last announced that it starves

    async def steal(self, wanted: tuple[Lease, ...], view: TableView, progressed: bool, report: CycleReport) -> None:
        """Act on the plan's wish to steal: force requests that are due, or request, once patient."""
        book = self.book
        book.keep_incarnation(self.ownership.held.incarnation)
        book.track(view.leases, self.renewal.announced, self.clock())
        if not wanted:
            book.clear()  # no longer starving: a holder that still sees a request releases anyway
            self.wanted_since = None
            return
        self._announce_need({lease.owner for lease in wanted if lease.owner})
        for request in book.due(self.clock(), self.timing.failover_s):
            victim = request.lease.owner
            why = f"stolen from {victim}, which did not release it within {self.timing.failover_s:g}s of the request"
            if await self.ownership.take(request.lease, why, report, victim=victim, incarnation=book.incarnation):
                report.stolen.append(request.lease.shard_id)
        if book.open:
            return  # the holders release at their next cycle, or are forced once due
        for lease in self._patient(wanted, progressed):
            await self._request(lease, report)

    async def _request(self, lease: Lease, report: CycleReport) -> None:
        requested = await self.calls.request_steal(lease, self.worker_id)
        if requested is None:
            log.debug("worker %s: %s changed before its steal request", self.worker_id, lease.shard_id)
            report.lost_races.append(lease.shard_id)
            return
        ticket = self.renewal.note_change((lease.owner,) if lease.owner else ())
        self.book.add(StealRequest(requested, ticket))
        report.requested.append(lease.shard_id)
        log.info("worker %s asked %s to release %s", self.worker_id, lease.owner, lease.shard_id)

    async def honour(self, view: TableView, report: CycleReport) -> TableView:
        """Release, gracefully, the held leases that starving workers asked for; the view as if they
        had taken them (so this cycle neither plans them nor hands them over again)."""
        asked = requested_of(self.worker_id, self.ownership.held.leases(), view)
        if not asked:
            return view
        moved = {}
        for lease, thief in asked:
            if await self.ownership.release(lease, f"its release was requested by starving worker {thief}", taker=thief):
                report.released.append(lease.shard_id)
            moved[lease.shard_id] = replace(view.leases[lease.shard_id], owner=thief, steal_requested_by=None)
        return TableView({**view.leases, **moved}, view.workers)

    def _announce_need(self, givers: Iterable[str]) -> None:
        """This worker starves and nothing is free: say so (``leaseChanges`` + 1, naming ``givers``)
        so the loaded workers read its need before their periodic re-read; at most once per 1.5
        renewals, since the bump makes this worker read too."""
        now = self.clock()
        if now - self.need_announced_at >= STEAL_PATIENCE_RENEWALS * self.timing.renew_s:
            self.need_announced_at = now
            self.renewal.note_change(givers)

    def _steal_patience_s(self) -> float:
        return STEAL_PATIENCE_RENEWALS * self.timing.renew_s + self.views.gap_s

    def _patient(self, steals: tuple[Lease, ...], progressed: bool) -> tuple[Lease, ...]:
        """Ask for a lease only if the wish outlasts 1.5 renewals plus the least gap between the
        others' lease reads, so a holder that reads the need can hand one over itself. Patience
        restarts whenever this cycle took a lease (``progressed``): hand-overs are under way."""
        now = self.clock()
        if self.wanted_since is None or progressed:
            self.wanted_since = now
        if now - self.wanted_since < self._steal_patience_s():
            return ()
        self.wanted_since = None
        return steals
