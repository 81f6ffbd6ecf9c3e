"""The coordinator's heartbeat loop: renewals on a schedule of their own, also while stop() releases.

:class:`RenewalLoop` is mixed into :class:`~.coordinator.LeaseCoordinator`;
the heartbeat itself (registration, announcements, self-doubt) is
:class:`~.renewal.HeartbeatRenewal`. The loop runs apart from the cycle (a
thread after ``start()``, a task after ``astart()``, a simulated process's
fiber) so that a cycle stuck behind a throttled read never delays a renewal,
and it ends only after stop() has released the leases: a worker that
stopped renewing first could be judged dead while its releases waited for
the consumer's checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable

from ..errors import KinesisSourceError
from .cycle_report import transient
from .in_place import run_sync
from .renewal import HeartbeatRenewal, RenewalMode
from .timing import LeaseTiming
from .wakeup import Wakeup

log = logging.getLogger(__name__)


class RenewalLoop:
    """Renew if due, wait, repeat, until stop() has released (mixed into the coordinator)."""

    worker_id: str
    timing: LeaseTiming
    renewal: HeartbeatRenewal
    failure: BaseException | None
    _renewal_stop: threading.Event
    _renewal_wake: Wakeup
    _renewal_thread: threading.Thread | None
    _renewal_task: asyncio.Task[None] | None
    _fail: Callable[[BaseException], None]

    def renew_on_own_schedule(self, waker: Callable[[], None]) -> None:
        """From now on the cycle does not renew: whoever calls :meth:`renewal_step` does, and
        ``waker`` interrupts its wait when a change is to be announced."""
        self.renewal.waker = waker
        self.renewal.mode = RenewalMode.OWN_SCHEDULE

    def _renewal_loop(self) -> None:
        while not self._renewal_stop.is_set() and self.failure is None:
            wait_s = self.renewal_step()
            if wait_s is None:
                return
            self._renewal_wake.wait(wait_s)

    async def _arenewal_loop(self) -> None:
        while not self._renewal_stop.is_set() and self.failure is None:
            wait_s = await self.arenewal_step()
            if wait_s is None:
                return
            await self._renewal_wake.until(wait_s)

    def renewal_step(self) -> float | None:
        return run_sync(self.arenewal_step())

    async def arenewal_step(self) -> float | None:
        """Renew if due (or a change waits to be announced); the seconds until the next step, None
        once the coordinator failed. One call per wake-up of the renewal loop (a thread, a task, or a
        simulated process)."""
        try:
            await self.renewal.arenew_if_due()
        except KinesisSourceError as exc:
            if not transient(exc):
                self._fail(exc)
                return None
            log.warning("worker %s: heartbeat failed, retrying: %s", self.worker_id, exc)
            return min(1.0, self.timing.renew_s / 4)
        except Exception as exc:  # noqa: BLE001 - a bug: stop loudly rather than hold leases without renewing
            self._fail(exc)
            return None
        return max(0.01, self.renewal.seconds_to_next())

    def _renewing_apart(self) -> bool:
        """A renewal thread or task other than the caller is running."""
        thread, task = self._renewal_thread, self._renewal_task
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            return True
        return task is not None and not task.done()

    async def _renew_while_stopping(self) -> None:
        """Between the releases of stop(): renew if due, unless the renewal thread or task does
        (``run_once`` callers and simulated processes have none running by then)."""
        if self._renewing_apart():
            return
        try:
            await self.renewal.arenew_if_due()
        except KinesisSourceError as exc:
            log.warning("worker %s: heartbeat while stopping failed: %s", self.worker_id, exc)
