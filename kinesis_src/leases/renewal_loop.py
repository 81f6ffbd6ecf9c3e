"""The heartbeat on a schedule of its own, apart from the cycle, also while stop() releases.

So a cycle stuck behind a throttled read never delays a renewal, and a worker whose releases wait
for checkpoints is not judged dead (docs/leases.md, "Expiry and fencing")."""

from __future__ import annotations

import logging
from typing import Callable

from ..errors import KinesisSourceError
from ..in_place import run_sync
from .cycle_report import transient
from .renewal import HeartbeatRenewal, RenewalMode
from .step_loop import StepLoop
from .timing import LeaseTiming

log = logging.getLogger(__name__)


class RenewalDriver:
    """Renew if due, wait, repeat, until told to stop; ``fail`` ends the coordinator on a fatal error."""

    def __init__(self, renewal: HeartbeatRenewal, timing: LeaseTiming, fail: Callable[[BaseException], None],
                 failed: Callable[[], bool]) -> None:
        self.renewal = renewal
        self.timing = timing
        self._fail = fail
        self._loop = StepLoop(f"lease-renewal-{renewal.worker_id}", self.astep, failed)

    def own_schedule(self, waker: Callable[[], None] | None = None) -> None:
        """From now on the cycle does not renew: whoever calls :meth:`step` does, and ``waker`` (the
        driver's own wake-up by default) interrupts its wait when a change is to be announced."""
        self.renewal.waker = waker or self._loop.wake
        self.renewal.mode = RenewalMode.OWN_SCHEDULE

    def start_thread(self) -> None:
        self.own_schedule()
        self._loop.start_thread()

    def start_task(self) -> None:
        self.own_schedule()
        self._loop.start_task()

    def stop(self, timeout_s: float) -> None:
        self._loop.stop(timeout_s)

    async def astop(self, timeout_s: float) -> None:
        await self._loop.astop(timeout_s)

    def step(self) -> float | None:
        return run_sync(self.astep())

    async def astep(self) -> float | None:
        """Renew if due (or a change waits to be announced); the seconds until the next step, None
        once the coordinator failed. One call per wake-up of the renewal loop."""
        try:
            await self.renewal.arenew_if_due()
        except KinesisSourceError as exc:
            if not transient(exc):
                self._fail(exc)
                return None
            log.warning("worker %s: heartbeat failed, retrying: %s", self.renewal.worker_id, exc)
            return min(1.0, self.timing.renew_s / 4)
        except Exception as exc:  # noqa: BLE001 - a bug: stop loudly rather than hold leases without renewing
            self._fail(exc)
            return None
        return max(0.01, self.renewal.seconds_to_next())

    async def renew_while_stopping(self) -> None:
        """Between the releases of stop(): renew if due, unless the renewal thread or task does
        (``run_once`` callers and simulated processes have none running by then)."""
        if self._loop.running():
            return
        try:
            await self.renewal.arenew_if_due()
        except KinesisSourceError as exc:
            log.warning("worker %s: heartbeat while stopping failed: %s", self.renewal.worker_id, exc)

