"""One simulated worker process: a real LeaseCoordinator on two fibers, driven by simulated time.

As :meth:`LeaseCoordinator.start` runs two threads, a worker runs two fibers:
the cycle (``run_once``, wait until ``_next_wake()``, the same handling of
transient and fatal errors) and the heartbeat renewal
(:meth:`~kinesis_src.leases.renewal_loop.RenewalDriver.step`, wait for as long as it says, woken
early when a change is to be announced), with the threads and
``Event.wait`` replaced by suspensions; ``stop()`` is the real graceful stop. The coordinator reads
the simulated clock (plus a per-host offset: boot clocks of different hosts
differ, and expiry must not care) through its ``clock`` parameter, and the
lease table the simulated wall clock through ``now_ms``.

States: running, leaving (stop requested), left, crashed (never resumed
again: a killed process), failed (the coordinator stopped on a fatal error).
A pause (GC, SIGSTOP, a frozen VM) delays whatever the worker would do next
until it ends; its clock keeps counting, as CLOCK_BOOTTIME does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import KinesisSourceError
from kinesis_src.leases.coordinator import CycleReport, LeaseCoordinator
from kinesis_src.leases.cycle_report import transient
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming

from .client import Request, SimBotocoreClient, SimSession, Sleep
from .fiber import Fiber

if TYPE_CHECKING:
    from .simulation import Simulation

WALL_EPOCH_MS = 1_750_000_000_000  # the simulated wall clock at simulated time 0


class _Task:
    """One of a process's fibers and the wake-up it is sleeping until (if any)."""

    def __init__(self, fiber: Fiber) -> None:
        self.fiber = fiber
        self.sleeping: Any = None


class SimWorker:
    """A worker process; the scheduler calls :meth:`step`, the fibers run the coordinator."""

    def __init__(self, sim: Simulation, worker_id: str, timing: LeaseTiming, clock_offset_s: float,
                 jitter_s: float, on_cycle: Callable[[SimWorker, CycleReport], None]) -> None:
        self.sim = sim
        self.worker_id = worker_id
        self.clock_offset_s = clock_offset_s
        self.jitter_s = jitter_s
        self.state = "new"
        self.paused_until = -math.inf
        self.failed_cycles = 0
        self.failure: BaseException | None = None
        self._on_cycle = on_cycle
        self.dynamodb = DynamoDBClient(
            AwsSettings(region="us-east-1"), session=SimSession(SimBotocoreClient(self._suspend))  # type: ignore[arg-type]
        )
        table = LeaseTable(self.dynamodb, sim.table_name, sim.application, sim.stream, now_ms=self._wall_ms)
        self.coordinator = LeaseCoordinator(
            table, worker_id, timing=timing, clock=self.clock, on_cycle=lambda r: on_cycle(self, r)
        )
        self.fiber = Fiber(self._life, f"sim-{worker_id}")
        self.renewal_fiber = Fiber(self._renewals, f"sim-{worker_id}-renewal")
        self._cycle = _Task(self.fiber)
        self._renewal = _Task(self.renewal_fiber)

    # -- clocks ----------------------------------------------------------------------------

    def clock(self) -> float:
        return self.sim.queue.now + self.clock_offset_s

    def _wall_ms(self) -> int:
        return WALL_EPOCH_MS + int(self.sim.queue.now * 1000)

    # -- the scheduler's side ----------------------------------------------------------------

    def start(self) -> None:
        self.state = "running"
        self.sim.queue.after(0.0, self.step)

    def step(self, value: Any = None) -> None:
        """Resume the cycle fiber with ``value`` (an answer, or None after a sleep)."""
        self._step(self._cycle, value)

    def _step(self, task: _Task, value: Any = None) -> None:
        """Resume one fiber until it suspends again (a request, a sleep) or ends."""
        if self.state in ("crashed", "left", "failed") or task.fiber.finished:
            return
        if self.sim.queue.now < self.paused_until:
            self.sim.queue.at(self.paused_until, lambda: self._step(task, value))
            return
        task.sleeping = None
        self.sim.current = self
        try:
            out = task.fiber.resume(value)
        finally:
            self.sim.current = None
        self.sim.after_step(self)
        if out is None:
            if task is self._cycle:
                self.state = "failed" if self.failure is not None else "left"
        elif isinstance(out, Request):
            self.sim.network.send(lambda answer: self._step(task, answer), out)
        elif isinstance(out, Sleep):
            task.sleeping = self.sim.queue.at(out.until, lambda: self._step(task))
        else:
            raise TypeError(f"worker {self.worker_id} suspended with {out!r}")

    def leave(self) -> None:
        """Graceful stop: the loops end at their next turn and stop() releases every lease."""
        self.state = "leaving"
        self._wake(self._cycle)
        self._wake(self._renewal)

    def crash(self) -> None:
        """A killed process: it is never resumed again (its fibers are unwound at the end)."""
        self.state = "crashed"

    def pause(self, duration_s: float) -> None:
        self.paused_until = self.sim.queue.now + duration_s

    def kill(self) -> None:
        self.fiber.kill()
        self.renewal_fiber.kill()

    def _wake(self, task: _Task) -> None:
        if task.sleeping is not None:
            self.sim.queue.cancel(task.sleeping)
            task.sleeping = None
            self.sim.queue.after(0.0, lambda: self._step(task))

    # -- the fibers' side ----------------------------------------------------------------------

    def runs_on_this_thread(self) -> bool:
        """The calling thread is one of this worker's fibers."""
        return self.fiber.is_current() or self.renewal_fiber.is_current()

    def _current(self) -> Fiber:
        return self.renewal_fiber if self.renewal_fiber.is_current() else self.fiber

    def _suspend(self, request: Any) -> Any:
        return self._current().suspend(request)

    def sleep(self, seconds: float) -> None:
        """Called on one of this worker's fibers (retry backoff): simulated time passes, others run."""
        self._current().suspend(Sleep(self.sim.queue.now + seconds))

    def _life(self) -> None:
        """What start() and _loop() do, with simulated waits; the renewal runs on its own fiber."""
        c = self.coordinator
        c.register()
        c.renewals.own_schedule(lambda: self._wake(self._renewal))
        self.sim.queue.after(0.0, lambda: self._step(self._renewal))
        while self.state == "running" and c.failure is None:
            try:
                c.run_once()
            except KinesisSourceError as exc:
                if not transient(exc):
                    c._fail(exc)
                    self.failure = exc
                    return
                self.failed_cycles += 1
            if self.state != "running":
                break
            wake = max(0.01, c._next_wake() - c.clock()) + self.sim.rng.uniform(0, self.jitter_s)
            self.fiber.suspend(Sleep(self.sim.queue.now + wake))
        if c.failure is not None:
            self.failure = c.failure
            return
        c.stop(release=True)

    def _renewals(self) -> None:
        """What the coordinator's renewal thread does, with simulated waits."""
        c = self.coordinator
        while self.state == "running" and c.failure is None:
            wait_s = c.renewals.step()
            if wait_s is None:
                return
            self.renewal_fiber.suspend(Sleep(self.sim.queue.now + wait_s))
