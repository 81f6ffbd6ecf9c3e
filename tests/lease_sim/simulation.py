"""The simulation: N shard leases, W workers, phases (start, join, leave, crash, pause), measured.

A phase applies its change (workers join, leave, crash...) and runs until the
assignment has converged: every running worker holds floor(N/W) or
ceil(N/W) leases, every lease is held by one of them, and nothing has moved
for ``quiet_s``. Its convergence time is the last move minus the phase's
start. Requests, consumed capacity and throttles are summed per simulated
second by the table's :class:`~.capacity.Ledger`.

Use it as a context manager: retry backoff is routed to simulated time for
its duration (``kinesis_src.aws.boundary.call_with_retry`` gets the
simulation's sleep), and the worker fibers are unwound on exit.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Self
from unittest import mock

from kinesis_src import retry
from kinesis_src.aws import boundary
from kinesis_src.leases.coordinator import CycleReport
from kinesis_src.leases.layout import LeaseLayout, partitions_for
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.schema.keys import LAYOUT_RANGE_KEY, layout_partition, lease_partition
from kinesis_src.leases.schema.lease_items import LEASE_PARTITIONS, LeaseCodec
from kinesis_src.leases.timing import LeaseTiming
from lineage import HashRange

from .capacity import PARTITION_RCU, PARTITION_WCU, Ledger
from .client import Network
from .dynamodb import SimDynamoDB
from .events import EventQueue
from .safety import SafetyChecker
from .workers import WALL_EPOCH_MS, SimWorker

MAX_HASH = 2**128 - 1


@dataclass(frozen=True)
class SimConfig:
    """One simulated deployment. Times in simulated seconds."""

    shards: int = 1000
    workers: int = 10
    seed: int = 1
    timing: LeaseTiming = field(default_factory=LeaseTiming)
    latency_s: tuple[float, float] = (0.005, 0.010)
    rcu_per_key: float = PARTITION_RCU
    wcu_per_key: float = PARTITION_WCU
    start_spread_s: float = 0.1  # workers that "start at once" start within this
    jitter_s: float = 0.05  # scheduling delay added to every wake-up
    clock_skew_s: float = 3600.0  # boot clocks differ by up to this (expiry must not care)
    quiet_s: float | None = None  # default: three renewal intervals
    phase_timeout_s: float = 300.0
    ignore_condition: Callable[[str, Mapping[str, Any]], bool] | None = None
    warm: bool = False  # the table starts balanced over the first ``workers`` worker ids (a restart)
    memo_decode: bool = False  # cache LeaseCodec.lease per stored item version (see Simulation)
    lease_partitions: int | None = None  # partition keys of the leases (None: as a shard sync sizes it)


@dataclass(frozen=True)
class PhaseResult:
    """What one phase cost and how long it took to settle."""

    name: str
    duration_s: float
    converged_after_s: float | None  # None: not converged within the timeout
    running_workers: int
    requests: Mapping[str, int]
    throttled: Mapping[str, int]
    failed_conditions: Mapping[str, int]
    rcu: float
    wcu: float
    peak_rcu_per_s: float
    peak_wcu_per_s: float
    moves: Mapping[str, int]
    failed_cycles: int
    hottest_key_rcu: float = 0.0  # the most read partition key's units over the phase
    hottest_key_wcu: float = 0.0

    def per_s(self, total: float) -> float:
        return total / self.duration_s if self.duration_s else 0.0

    @property
    def request_total(self) -> int:
        return sum(self.requests.values())


@dataclass
class _PhaseCounters:
    moves: Counter = field(default_factory=Counter)
    failed_cycles_at_start: int = 0


class Simulation:
    """Drives real LeaseCoordinators over a simulated DynamoDB in simulated time."""

    table_name = "leases"
    application = "sim"
    stream = "orders"

    def __init__(self, config: SimConfig = SimConfig()) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.queue = EventQueue()
        self.ledger = Ledger(config.rcu_per_key, config.wcu_per_key)
        self.table = SimDynamoDB(self.ledger, lambda: self.queue.now, ignore_condition=config.ignore_condition)
        self.network = Network(self.queue, self.table, self.rng, config.latency_s)
        self.partition = lease_partition(self.application, self.stream)
        partitions = config.lease_partitions or partitions_for(config.shards)
        self.layout = LeaseLayout(self.partition, partitions, recorded=True)  # as a first shard sync records it
        self.checker = SafetyChecker(
            self._held_ids, self._fresh, lambda: self.queue.now, self._moved, self._registered
        )
        self.table.write_hooks.append(self.checker.on_write)
        self.workers: dict[str, SimWorker] = {}
        self.current: SimWorker | None = None
        self.stolen: set[tuple[str, str]] = set()  # (thief, shard) of every forced steal
        self.last_change = 0.0
        self.phases: list[PhaseResult] = []
        self._phase = _PhaseCounters()
        self._names = iter(range(10**9))
        self._patch = mock.patch.object(boundary, "call_with_retry", self._call_with_retry)
        self._decode_patch = mock.patch.object(LeaseCodec, "lease", _memo_lease(LeaseCodec.lease))
        self.progress: Callable[[Simulation], None] | None = None  # called every 0.5 simulated s
        self._populate(config.shards, config.workers if config.warm else 0)

    # -- set-up and tear-down ------------------------------------------------------------------

    def __enter__(self) -> Self:
        random.seed(self.config.seed)  # tenacity's backoff jitter draws from the global generator
        self._patch.start()
        if self.config.memo_decode:
            self._decode_patch.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._patch.stop()
        if self.config.memo_decode:
            self._decode_patch.stop()
        for worker in self.workers.values():
            worker.kill()

    def _populate(self, shards: int, owners: int) -> None:
        """One lease per shard at TRIM_HORIZON, hash ranges tiling the key space, in the layout a
        shard sync would have recorded (uncharged).

        Unowned, or with ``owners``, dealt round-robin to worker ids 0..owners-1
        (the ids :meth:`add_worker` gives out first): workers restarting on a
        balanced table adopt their own leases instead of racing for free ones.
        """
        codec = LeaseCodec(self.table_name)
        self.table.load({"pk": {"S": layout_partition(self.application, self.stream)}, "sk": {"S": LAYOUT_RANGE_KEY},
                         LEASE_PARTITIONS: {"N": str(self.layout.partitions)}})
        width = (MAX_HASH + 1) // shards
        for i in range(shards):
            end = MAX_HASH if i == shards - 1 else (i + 1) * width - 1
            owner = f"worker-{i % owners:04d}" if owners else None
            lease = Lease(f"shardId-{i:012d}", Checkpoint.trim_horizon(), HashRange(i * width, end),
                          counter=1 if owner else 0, owner=owner, last_updated_ms=WALL_EPOCH_MS)
            self.table.load(codec.lease_item(self.layout.partition_of(lease.shard_id), lease))

    def add_worker(self) -> SimWorker:
        worker_id = f"worker-{next(self._names):04d}"
        worker = SimWorker(
            self, worker_id, self.config.timing, self.rng.uniform(0, self.config.clock_skew_s),
            self.config.jitter_s, self._on_cycle,
        )
        self.workers[worker_id] = worker
        return worker

    # -- hooks -----------------------------------------------------------------------------------

    def _call_with_retry(self, *args: Any, **kwargs: Any) -> Any:
        """The real retry path; on a worker's fiber its backoff is simulated time.

        The patch is process-wide, so a thread that is no fiber of the running
        worker (another test's leftover, a library's) retries as if unpatched:
        its sleep must never suspend a fiber it does not run on.
        """
        if self.current is None or not self.current.runs_on_this_thread():
            return retry.call_with_retry(*args, **kwargs)
        return retry.call_with_retry(*args, sleep=self.current.sleep, **kwargs)

    def after_step(self, worker: SimWorker) -> None:
        if worker.fiber.finished or worker.state == "crashed":
            self.checker.forget(worker.worker_id)
        else:
            self.checker.observe(worker.worker_id)

    def _held_ids(self, worker_id: str) -> set[str]:
        worker = self.workers[worker_id]
        if worker.state == "crashed" or worker.fiber.finished:
            return set()
        return set(worker.coordinator.held())

    def _fresh(self, worker_id: str) -> bool:
        return self.workers[worker_id].coordinator.view_is_fresh()

    def _registered(self, worker_id: str) -> bool:
        """Whether the worker's heartbeat item exists (it has not been declared dead or left)."""
        part = self.table.partitions.get(self.partition)
        return part is not None and f"worker#{worker_id}" in part.items

    def _moved(self) -> None:
        self.last_change = self.queue.now

    def _on_cycle(self, worker: SimWorker, report: CycleReport) -> None:
        moves = self._phase.moves
        moves["acquired"] += len(report.acquired) - len(report.stolen)
        moves["stolen"] += len(report.stolen)
        self.stolen.update((worker.worker_id, shard) for shard in report.stolen)
        moves["lost race"] += len(report.lost_races)
        moves["released"] += len(report.released)
        moves["lost"] += len(report.lost)
        moves["declared dead"] += len(report.declared_dead)

    # -- state -----------------------------------------------------------------------------------

    def running(self) -> list[SimWorker]:
        return [w for w in self.workers.values() if w.state == "running"]

    def balanced(self) -> bool:
        """Every running worker holds floor or ceil of N/W, and together they hold every lease once."""
        running = self.running()
        if not running:
            return False
        n = self.config.shards
        low, high = n // len(running), -(-n // len(running))
        counts = [len(self.checker.beliefs.get(w.worker_id, ())) for w in running]
        held = [len(w.coordinator.held()) for w in running]
        return counts == held and sum(held) == n and all(low <= c <= high for c in held)

    def failed_cycles(self) -> int:
        return sum(w.failed_cycles for w in self.workers.values())

    # -- phases ----------------------------------------------------------------------------------

    def phase(self, name: str, change: Callable[[], None], duration_s: float | None = None) -> PhaseResult:
        """Apply ``change`` now, then run until converged and quiet (or for ``duration_s`` exactly)."""
        start = self.queue.now
        self._phase = _PhaseCounters(failed_cycles_at_start=self.failed_cycles())
        change()
        self.last_change = start
        quiet = self.config.quiet_s if self.config.quiet_s is not None else 3 * self.config.timing.renew_s
        converged: float | None = None
        end = start + (duration_s if duration_s is not None else self.config.phase_timeout_s)
        while self.queue.now < end:
            self.queue.run_until(min(end, self.queue.now + 0.5))
            if self.progress is not None:
                self.progress(self)
            settled = self.balanced() and self.queue.now - self.last_change >= quiet
            if settled and duration_s is None:
                converged = self.last_change - start
                break
        if duration_s is not None and self.balanced():
            converged = self.last_change - start if self.last_change > start else 0.0
        self.checker.settle(self.stolen)
        result = self._result(name, start, converged)
        self.phases.append(result)
        return result

    def start_workers(self, count: int) -> list[SimWorker]:
        workers = [self.add_worker() for _ in range(count)]
        for worker in workers:
            self.queue.after(self.rng.uniform(0, self.config.start_spread_s), worker.start)
        return workers

    def _result(self, name: str, start: float, converged: float | None) -> PhaseResult:
        seconds = [s for t, s in self.ledger.seconds.items() if start <= t < self.queue.now]
        requests: Counter = Counter()
        throttled: Counter = Counter()
        failed: Counter = Counter()
        rcu_by_key: Counter = Counter()
        wcu_by_key: Counter = Counter()
        for second in seconds:
            rcu_by_key.update(second.rcu_by_key)
            wcu_by_key.update(second.wcu_by_key)
            requests.update(second.requests)
            throttled.update(second.throttled)
            failed.update(second.failed_conditions)
        return PhaseResult(
            name=name,
            duration_s=self.queue.now - start,
            converged_after_s=converged,
            running_workers=len(self.running()),
            requests=dict(requests),
            throttled=dict(throttled),
            failed_conditions=dict(failed),
            rcu=sum(s.rcu for s in seconds),
            wcu=sum(s.wcu for s in seconds),
            peak_rcu_per_s=max((s.rcu for s in seconds), default=0.0),
            peak_wcu_per_s=max((s.wcu for s in seconds), default=0.0),
            moves=dict(self._phase.moves),
            failed_cycles=self.failed_cycles() - self._phase.failed_cycles_at_start,
            hottest_key_rcu=max(rcu_by_key.values(), default=0.0),
            hottest_key_wcu=max(wcu_by_key.values(), default=0.0),
        )


def _memo_lease(decode: Callable[[LeaseCodec, Any], Lease]) -> Callable[[LeaseCodec, Any], Lease]:
    """LeaseCodec.lease, computed once per stored item version (``memo_decode``).

    The simulated table never mutates an item (each write stores a new dict)
    and hands out the stored dicts, and decoding is a pure function of the
    item, so this changes no outcome, only the wall time: at 10,000 leases
    every scan otherwise decodes 10,000 items on the simulation's one core
    (the real cost per worker, which the benchmark measures separately).
    """
    cache: dict[int, tuple[Any, Lease]] = {}

    def lease(codec: LeaseCodec, item: Any) -> Lease:
        hit = cache.get(id(item))
        if hit is not None and hit[0] is item:
            return hit[1]
        if len(cache) > 500_000:
            cache.clear()
        decoded = decode(codec, item)
        cache[id(item)] = (item, decoded)
        return decoded

    return lease
