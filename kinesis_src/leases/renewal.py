"""This worker's heartbeat: registration, renewal on its own schedule, announcements, self-doubt.

A worker's leases live as long as its heartbeat item changes, so a renewal waits behind nothing but
its own write; the renewal alone writes the item. Why: docs/leases.md, "Expiry and fencing"."""

from __future__ import annotations

import enum
import logging
import threading
from typing import Callable, Iterable

from ..errors import WorkerIdInUseError
from ..in_place import run_sync
from .model import HeartbeatStatus, WorkerHeartbeat
from .table_calls import TableCalls
from .timing import LeaseTiming

log = logging.getLogger(__name__)


class RenewalMode(enum.Enum):
    """Who sends the heartbeat: the cycle itself, or a renewal loop of its own."""

    IN_CYCLE = "in cycle"
    OWN_SCHEDULE = "own schedule"


class RenewalState(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"  # stop() began: a late answer must not register the worker again


# a status worth reporting over a plain renewal: the strongest since the cycle last asked
_RANK = {None: 0, HeartbeatStatus.RENEWED: 1, HeartbeatStatus.DECLARED_DEAD: 2, HeartbeatStatus.REPLACED: 3}


class HeartbeatRenewal:
    """The heartbeat item of one worker process, and what its acknowledged renewals prove.
    ``on_declared_dead`` runs, before registering again, when a renewal finds the item deleted.
    Thread-safe: renewals come from one thread; others ask :meth:`is_live` and mark changes."""

    def __init__(self, table: TableCalls, worker_id: str, timing: LeaseTiming, clock: Callable[[], float],
                 on_declared_dead: Callable[[], None], where: Callable[[], str]) -> None:
        self.table = table
        self.worker_id = worker_id
        self.timing = timing
        self.clock = clock
        self.mode = RenewalMode.IN_CYCLE
        self.state = RenewalState.RUNNING
        self.me: WorkerHeartbeat | None = None
        self.renewed_at = float("-inf")  # send time of the last acknowledged heartbeat
        self.next_due = float("-inf")
        self.renewals = 0
        self._on_declared_dead = on_declared_dead
        self._where = where
        self._lock = threading.Lock()
        self._changed = False  # an ownership change not announced yet
        self._notify: set[str] = set()  # workers the changes since the last announcement concern
        self._noted = 0  # tickets given out by note_change()
        self.announced = 0  # the last ticket an acknowledged heartbeat announced
        self._status: HeartbeatStatus | None = None  # strongest outcome since take_status()
        self.waker: Callable[[], None] = lambda: None  # set by whoever runs the own-schedule loop

    # -- registration ------------------------------------------------------------------

    def register(self) -> WorkerHeartbeat:
        return run_sync(self.aregister())

    async def aregister(self) -> WorkerHeartbeat:
        """Write a new heartbeat item (a new session); a previous process with this id loses."""
        sent = self.clock()
        self.me = await self.table.register_worker(self.worker_id)
        with self._lock:
            self.renewed_at, self.next_due = sent, sent + self.timing.renew_s
        log.info("worker %s registered (session %s) for %s", self.worker_id, self.me.session, self._where())
        return self.me

    def stop(self) -> None:
        self.state = RenewalState.STOPPED

    # -- what the others may conclude ----------------------------------------------------

    def is_live(self) -> bool:
        """No other worker can have declared this one dead yet (local clock, minus the margin)."""
        return self.clock() < self.renewed_at + self.timing.failover_s - self.timing.margin_s

    def note_change(self, notify: Iterable[str] = ()) -> int:
        """This worker changed lease ownership: the next heartbeat announces it, naming the workers in
        ``notify`` (:mod:`.view`); wake the renewal. Returns a ticket: the change has been announced
        once :attr:`announced` reaches it."""
        with self._lock:
            self._changed = True
            self._notify.update(notify)
            self._noted += 1
            ticket = self._noted
        if self.mode is RenewalMode.OWN_SCHEDULE:
            self.waker()
        return ticket

    @property
    def change_pending(self) -> bool:
        with self._lock:
            return self._changed

    def take_status(self) -> HeartbeatStatus | None:
        """The strongest outcome since the last call (DECLARED_DEAD over RENEWED): for the cycle report."""
        with self._lock:
            status, self._status = self._status, None
        return status

    # -- renewing ----------------------------------------------------------------------------

    def due(self) -> bool:
        """A renewal is due (Event.wait may wake a hair early), or a change waits to be announced."""
        return self.clock() >= self.next_due - 0.01 or self.change_pending

    def seconds_to_next(self) -> float:
        return 0.0 if self.change_pending else max(0.0, self.next_due - self.clock())

    def renew(self) -> HeartbeatStatus:
        return run_sync(self.arenew())

    async def arenew(self) -> HeartbeatStatus:
        """Send one heartbeat, announcing a pending change; react to being declared dead or replaced."""
        if self.me is None:
            await self.aregister()
        now = self.clock()
        with self._lock:
            changed, self._changed = self._changed, False
            notify, self._notify = self._notify, set()
            ticket = self._noted
        try:
            status, me = await self.table.heartbeat(self.me, changed, tuple(sorted(notify)))  # type: ignore[arg-type]
        except BaseException:
            self._unsent(changed, notify)
            raise
        self._note(status)
        if status is not HeartbeatStatus.RENEWED:
            self._unsent(changed, notify)  # announced again after registering anew
        if status is HeartbeatStatus.RENEWED:
            with self._lock:
                self.me, self.renewals = me, self.renewals + 1
                self.renewed_at, self.next_due = max(self.renewed_at, now), now + self.timing.renew_s
                if changed:
                    self.announced = max(self.announced, ticket)
            log.debug("worker %s heartbeat %d", self.worker_id, me.heartbeat)
        elif status is HeartbeatStatus.REPLACED:
            raise WorkerIdInUseError(
                f"another process registered worker id {self.worker_id!r} for {self._where()}; this "
                "process stops. Give every worker process a unique worker id."
            )
        elif self.state is RenewalState.RUNNING:  # declared dead (not our own deregistration racing)
            log.warning(
                "worker %s was declared dead by another worker (its heartbeat was not seen for %.1fs); "
                "dropping all leases and registering again", self.worker_id, self.timing.failover_s,
            )
            with self._lock:
                self.renewed_at = float("-inf")  # not live until registered anew: the cycle takes nothing
            self._on_declared_dead()
            await self.aregister()
        return status

    def _unsent(self, changed: bool, notify: set[str]) -> None:
        """An announcement that did not land is sent with the next heartbeat."""
        if changed:
            with self._lock:
                self._changed = True
                self._notify |= notify

    def renew_if_due(self) -> HeartbeatStatus | None:
        return run_sync(self.arenew_if_due())

    async def arenew_if_due(self) -> HeartbeatStatus | None:
        return await self.arenew() if self.due() else None

    def _note(self, status: HeartbeatStatus) -> None:
        with self._lock:
            if _RANK[status] > _RANK[self._status]:
                self._status = status

    async def aderegister(self) -> bool:
        return self.me is not None and await self.table.deregister_worker(self.me)
