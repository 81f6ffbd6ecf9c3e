"""One simulated worker process: a real LeaseCoordinator on a fiber, driven by simulated time.

The fiber runs what :meth:`LeaseCoordinator.start` and its loop run (register,
``run_once``, wait until ``_next_wake()``, the same handling of transient
and fatal errors), with the thread and ``Event.wait`` replaced by
suspensions; ``stop()`` is the real graceful stop. The coordinator reads
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
from kinesis_src.leases import coordinator as coordinator_module
from kinesis_src.leases.coordinator import CycleReport, LeaseCoordinator
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming

from .client import Request, SimBotocoreClient, SimSession, Sleep
from .fiber import Fiber

if TYPE_CHECKING:
    from .simulation import Simulation

WALL_EPOCH_MS = 1_750_000_000_000  # the simulated wall clock at simulated time 0


class SimWorker:
    """A worker process; the scheduler calls :meth:`step`, the fiber runs the coordinator."""

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
        self._sleep_event: Any = None
        self._on_cycle = on_cycle
        self.dynamodb = DynamoDBClient(
            AwsSettings(region="us-east-1"), session=SimSession(SimBotocoreClient(self._suspend))  # type: ignore[arg-type]
        )
        table = LeaseTable(self.dynamodb, sim.table_name, sim.application, sim.stream, now_ms=self._wall_ms)
        self.coordinator = LeaseCoordinator(
            table, worker_id, timing=timing, clock=self.clock, on_cycle=lambda r: on_cycle(self, r)
        )
        self.fiber = Fiber(self._life, f"sim-{worker_id}")

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
        """Resume the fiber with ``value`` (an answer, or None after a sleep) until it suspends again."""
        if self.state in ("crashed", "left", "failed"):
            return
        if self.sim.queue.now < self.paused_until:
            self.sim.queue.at(self.paused_until, lambda: self.step(value))
            return
        self._sleep_event = None
        self.sim.current = self
        try:
            out = self.fiber.resume(value)
        finally:
            self.sim.current = None
        self.sim.after_step(self)
        if out is None:
            self.state = "failed" if self.failure is not None else "left"
        elif isinstance(out, Request):
            self.sim.network.send(self, out)
        elif isinstance(out, Sleep):
            self._sleep_event = self.sim.queue.at(out.until, self.step)
        else:
            raise TypeError(f"worker {self.worker_id} suspended with {out!r}")

    def leave(self) -> None:
        """Graceful stop: the loop ends at its next turn and stop() releases every lease."""
        self.state = "leaving"
        self._wake()

    def crash(self) -> None:
        """A killed process: it is never resumed again (its fiber is unwound at the end)."""
        self.state = "crashed"

    def pause(self, duration_s: float) -> None:
        self.paused_until = self.sim.queue.now + duration_s

    def _wake(self) -> None:
        if self._sleep_event is not None:
            self.sim.queue.cancel(self._sleep_event)
            self._sleep_event = None
            self.sim.queue.after(0.0, self.step)

    # -- the fiber's side ----------------------------------------------------------------------

    def _suspend(self, request: Any) -> Any:
        return self.fiber.suspend(request)

    def sleep(self, seconds: float) -> None:
        """Called on this fiber (retry backoff): simulated time passes, other workers run."""
        self.fiber.suspend(Sleep(self.sim.queue.now + seconds))

    def _life(self) -> None:
        """What start() and _loop() do, with simulated waits."""
        c = self.coordinator
        c.register()
        while self.state == "running":
            try:
                c.run_once()
            except KinesisSourceError as exc:
                if not coordinator_module._transient(exc):
                    c._fail(exc)
                    self.failure = exc
                    return
                self.failed_cycles += 1
            if self.state != "running":
                break
            wake = max(0.01, c._next_wake() - c.clock()) + self.sim.rng.uniform(0, self.jitter_s)
            self.fiber.suspend(Sleep(self.sim.queue.now + wake))
        c.stop(release=True)
