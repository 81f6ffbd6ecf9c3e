"""The lease coordinator a worker runs: heartbeat, scan, balance, and the held-lease set.

A worker renews *itself* (one heartbeat item), not each lease, and every holder write is fenced
on (owner, counter). Guarantees and why: docs/leases.md, "Expiry and fencing"."""


from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable, Sequence

from lineage import shard_sort_key

from ..clock import since_boot
from ..errors import (
    KinesisSourceError,
    LeaseLostError,
)
from ..in_place import run_sync
from ..names import validate_worker_id
from ..positions import Position
from ..records import ChildShard
from .cycle_report import CycleReport
from .cycle_report import transient as _transient
from .held_leases import HeldLeases
from .listener import LeaseListener, NoListener, SyncsShards
from .model import (
    Checkpoint,
    HeartbeatStatus,
    Lease,
    ShardEndResult,
    Throughput,
)
from .ownership import Ownership
from .renewal import HeartbeatRenewal, RenewalMode
from .renewal_loop import RenewalDriver
from .steal_requests import STEAL_PATIENCE_RENEWALS, Steals
from .step_loop import StepLoop
from .table import LeaseTable
from .table_calls import TableCalls
from .timing import LeaseTiming
from .view import ViewReader

log = logging.getLogger(__name__)


# -- the coordinator ----------------------------------------------------------------

_FATAL_NOTE = "the lease coordinator stopped; fix the cause and restart the worker"


class LeaseCoordinator:
    """Keeps this worker's share of an application's leases on one stream. ``astart()`` runs the
    cycle and the heartbeat as two tasks on the caller's event loop, ``start()`` on two threads,
    ``run_once()`` one cycle in place. Other threads may call :meth:`checkpoint`,
    :meth:`shard_ended` and :meth:`held` while it runs."""

    def __init__(
        self,
        table: LeaseTable,
        worker_id: str,
        *,
        timing: LeaseTiming = LeaseTiming(),
        preserve_shard_order: bool = True,
        shard_sync: SyncsShards | None = None,
        listener: LeaseListener | None = None,
        on_cycle: Callable[[CycleReport], None] | None = None,
        clock: Callable[[], float] = since_boot,
        calls: TableCalls | None = None,
        held: HeldLeases | None = None,
    ) -> None:
        self.table = table
        self.calls = calls or TableCalls(table)
        self.worker_id = validate_worker_id(worker_id)
        self.timing = timing
        self.preserve_shard_order = preserve_shard_order
        self.shard_sync = shard_sync
        self.listener: LeaseListener = listener or NoListener()
        self.on_cycle = on_cycle
        self.clock = clock
        self.held_leases: HeldLeases = held if held is not None else HeldLeases()  # shared with the reader
        self.renewal = HeartbeatRenewal(self.calls, self.worker_id, timing, clock, self._declared_dead, self._where)
        self.renewals = RenewalDriver(self.renewal, timing, self._fail, lambda: self.failure is not None)
        self._cycle_report: CycleReport | None = None  # the cycle running now (in-cycle renewals report to it)
        self._next_sync = float("-inf")
        self._views = ViewReader(self.calls, timing, clock, table.known_partitions, self.worker_id)
        self._last_scan = float("-inf")
        self._cycles = StepLoop(f"leases-{self.worker_id}", self._cycle_step, lambda: self.failure is not None)
        self.ownership = Ownership(
            self.worker_id, timing, clock, held=self.held_leases, calls=self.calls, views=self._views,
            renewal=self.renewal, listener=self.listener, is_live=self.is_live, now_ms=table.now_ms,
            where=self._where(), preserve_shard_order=preserve_shard_order,
            sync=None if shard_sync is None else self._sync, wake=self._cycles.wake,
        )
        self.steals = Steals(self.worker_id, timing, clock, ownership=self.ownership, calls=self.calls,
                             renewal=self.renewal, views=self._views)
        self.failure: BaseException | None = None
        self.cycles = 0

    # -- lifecycle ---------------------------------------------------------------------

    def register(self) -> None:
        """Write this process's heartbeat item; called by start() and after being declared dead."""
        self.renewal.register()

    def start(self, sync_now: bool = True) -> LeaseCoordinator:
        """Register, sync shards once (repairs a table the stream outgrew), cycle once, then loop:
        the cycle on one thread, the heartbeat renewal on another (:mod:`.renewal_loop`)."""
        self.register()
        self.renewals.start_thread()
        try:
            run_sync(self._first_cycle(sync_now))
        except BaseException:
            # nobody will call stop() on a coordinator whose start() raised: end the renewal here,
            # or it heartbeats (and holds whatever the cycle took) for the rest of the process
            self.stop(release=True)
            raise
        self._cycles.start_thread()
        return self

    async def astart(self, sync_now: bool = True) -> LeaseCoordinator:
        """:meth:`start` on the running event loop: the cycle and the renewal are two tasks there.
        Its steps must then be awaited on that loop (``arun_once``, ``ashard_ended``, ``arelease``)."""
        await self.renewal.aregister()
        self.renewals.start_task()
        try:
            await self._first_cycle(sync_now)
        except BaseException:
            await asyncio.shield(self.astop(release=True))
            raise
        self._cycles.start_task()
        return self

    async def _first_cycle(self, sync_now: bool) -> None:
        if sync_now and self.shard_sync is not None:
            await self._sync()
        await self.arun_once()

    def stop(self, release: bool = True, timeout_s: float = 30.0) -> None:
        """Stop the cycle; release held leases (graceful hand-off); then stop renewing and remove
        the heartbeat. Renewals go on until the releases, which wait for checkpoints, are done."""
        self._cycles.stop(timeout_s)
        run_sync(self._release_all(release))
        self.renewals.stop(timeout_s)
        run_sync(self._deregister())

    async def astop(self, release: bool = True, timeout_s: float = 30.0) -> None:
        """:meth:`stop` for a coordinator started with :meth:`astart`, on its loop."""
        await self._cycles.astop(timeout_s)
        await self._release_all(release)
        await self.renewals.astop(timeout_s)
        await self._deregister()

    async def _release_all(self, release: bool) -> None:
        if release:
            for lease in self.held_leases.leases().values():
                await self.renewals.renew_while_stopping()
                await self.ownership.release(lease, "worker stopping")

    async def _deregister(self) -> None:
        self.renewal.stop()
        try:
            await self.renewal.aderegister()
        except KinesisSourceError as exc:
            log.warning("worker %s: could not remove its heartbeat item: %s", self.worker_id, exc)

    def __enter__(self) -> LeaseCoordinator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._cycles.running()

    def wake(self) -> None:
        """Run the next cycle now (e.g. after a shard ended, so its children are picked up)."""
        self._cycles.wake()

    # -- what the consumer uses ------------------------------------------------------------

    def held(self) -> dict[str, Lease]:
        """Leases this worker may process now; empty while its own heartbeat is overdue."""
        if not self.is_live():
            return {}
        return self.held_leases.leases()

    def view_is_fresh(self) -> bool:
        """True while this worker has read the table recently enough to have seen any steal coming:
        a thief forces one only ``failover_s`` after announcing it, and a view (dated by
        :attr:`~.view.ViewReader.current_at`) stays fresh for 1.5 renewals (docs/leases.md)."""
        return self.clock() - self._views.current_at < STEAL_PATIENCE_RENEWALS * self.timing.renew_s

    def is_live(self) -> bool:
        """True while no other worker can have declared this one dead (local clock)."""
        return self.failure is None and self.renewal.is_live()

    def lease(self, shard_id: str) -> Lease:
        return self.ownership.lease(shard_id)

    def report_throughput(self, shard_id: str, records: int, nbytes: int) -> None:
        """The consumer delivered ``records`` records of ``nbytes`` bytes from a held shard. No I/O:
        the estimate is written with the shard's next checkpoint, and the balancer weighs leases by
        it (:mod:`.throughput`)."""
        meter = self.held_leases.meter(shard_id)
        if meter is not None:
            meter.add(records, nbytes, self.clock())

    def checkpoint(self, shard_id: str, checkpoint: Checkpoint | Position, counter: int | None = None) -> Lease:
        """Record progress on a held shard, with its throughput estimate; LeaseLostError if the lease was taken,
        or if ``counter`` (the holding the checkpoint comes from) is not the counter held now."""
        lease, checkpoint, estimate = self._checkpoint_of(shard_id, checkpoint, counter)
        try:
            updated = self.table.checkpoint(lease, checkpoint, estimate)
        except LeaseLostError:
            self._checkpoint_rejected(lease)
            raise
        return self._checkpointed(updated)

    async def acheckpoint(self, shard_id: str, checkpoint: Checkpoint | Position, counter: int | None = None,
                          ) -> Lease:
        """:meth:`checkpoint` on the caller's event loop, through the table's calls (the async client
        where there is one: no thread hop)."""
        lease, checkpoint, estimate = self._checkpoint_of(shard_id, checkpoint, counter)
        try:
            updated = await self.calls.checkpoint(lease, checkpoint, estimate)
        except LeaseLostError:
            self._checkpoint_rejected(lease)
            raise
        return self._checkpointed(updated)

    def _checkpoint_of(self, shard_id: str, checkpoint: Checkpoint | Position, counter: int | None,
                       ) -> tuple[Lease, Checkpoint, Throughput | None]:
        """The lease to fence on (LeaseLostError if ``counter`` is not held), the checkpoint, the estimate."""
        if isinstance(checkpoint, Position):
            checkpoint = Checkpoint.from_position(checkpoint)
        lease = self.ownership.held_at(shard_id, counter, "a checkpoint")
        meter = self.held_leases.meter(shard_id)
        return lease, checkpoint, None if meter is None else meter.rate(self.clock(), self.table.now_ms())

    def _checkpoint_rejected(self, lease: Lease) -> None:
        self.ownership.drop(lease, "checkpoint rejected: lease taken over")
        self._views.invalidate()  # the table changed unannounced (or unseen yet): read it again

    def _checkpointed(self, updated: Lease) -> Lease:
        self.held_leases.update(updated, same_counter=True)  # unless released or taken again meanwhile
        return updated

    def release(self, shard_id: str) -> bool:
        return run_sync(self.arelease(shard_id))

    def shard_ended(self, shard_id: str, children: Sequence[ChildShard | Lease], counter: int | None = None,
                    ) -> ShardEndResult:
        return run_sync(self.ashard_ended(shard_id, children, counter))

    async def ashard_ended(self, shard_id: str, children: Sequence[ChildShard | Lease], counter: int | None = None,
                           ) -> ShardEndResult:
        """The shard was read to its end: child leases, SHARD_END, given up (:meth:`.Ownership.end_shard`)."""
        return await self.ownership.end_shard(shard_id, children, counter)

    async def arelease(self, shard_id: str) -> bool:
        """Give one held lease up now (the caller has checkpointed)."""
        return await self.ownership.release(self.lease(shard_id), "released by the consumer", notify=False)

    # -- the cycle ------------------------------------------------------------------------

    def run_once(self) -> CycleReport:
        return run_sync(self.arun_once())

    async def arun_once(self) -> CycleReport:
        """Heartbeat (if due), scan, reconcile, sync (if leader and due), balance."""
        report = self._cycle_report = CycleReport()
        self._last_scan = self.clock()
        in_cycle = self.renewal.mode is RenewalMode.IN_CYCLE
        if in_cycle:
            report.heartbeat = await self.renewal.arenew_if_due()
        view, report.read_leases = await self._views.aread()
        ownership = self.ownership
        view = await self.steals.honour(view, report)  # first: a thief may force once this view goes stale
        live = await ownership.judge_workers(view, report)
        await ownership.reconcile(view, report)
        if self._sync_due(live):
            view, report.read_leases = await self._views.aread(force=True)  # sync reads leases before listing
            report.synced = await self._sync(view.leases.values())
            if self.renewal.change_pending:
                view, _ = await self._views.aread(force=True)
            await ownership.reconcile(view, report)
        wanted = await ownership.balance(view, live, report)
        if wanted is not None:
            await self.steals.steal(wanted, view, progressed=bool(report.acquired), report=report)
        if in_cycle and self.renewal.change_pending:
            report.announced = await self.renewal.arenew() is HeartbeatStatus.RENEWED
        elif not in_cycle:
            report.heartbeat = self.renewal.take_status()
        self._cycle_report = None
        report.live_workers = tuple(sorted(live))
        report.held = tuple(sorted(self.held_leases.leases(), key=shard_sort_key))
        self.cycles += 1
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    async def _cycle_step(self) -> float | None:
        """One cycle of the running coordinator; the seconds to the next, None once it failed in a way
        no further cycle can fix (the coordinator stops)."""
        try:
            await self.arun_once()
        except KinesisSourceError as exc:
            if not _transient(exc):
                self._fail(exc)
                return None
            log.warning("worker %s: lease cycle failed, retrying next cycle: %s", self.worker_id, exc)
        except Exception as exc:  # a bug: stop loudly rather than hold leases without renewing
            self._fail(exc)
            return None
        return max(0.01, self._next_wake() - self.clock())

    def _fail(self, error: BaseException) -> None:
        self.failure = error
        log.error("worker %s: %s: %s", self.worker_id, _FATAL_NOTE, error)
        for lease in self.held_leases.leases().values():
            self.ownership.drop(lease, f"coordinator stopped: {type(error).__name__}")

    def _next_wake(self) -> float:
        """Next scan, the moment a watched worker would expire, or (renewing in the cycle) the next
        heartbeat: the first."""
        wake = min(self._last_scan + self.timing.scan_s, self.ownership.judge.next_expiry())
        if self.renewal.mode is RenewalMode.IN_CYCLE:
            wake = min(wake, self.renewal.next_due)
        return wake

    def _declared_dead(self) -> None:
        """Another worker deleted our heartbeat: every lease may be someone else's by now, those of takes
        still in flight included (:meth:`~.ownership.Ownership.take` does not hold them)."""
        self.held_leases.new_incarnation()
        for lease in self.held_leases.leases().values():
            self.ownership.drop(lease, "this worker was declared dead", self._cycle_report)

    def _sync_due(self, live: set[str]) -> bool:
        if self.shard_sync is None or self.clock() < self._next_sync:
            return False
        return min(live) == self.worker_id

    async def _sync(self, leases: Iterable[Lease] | None = None) -> object | None:
        self._next_sync = self.clock() + self.timing.sync_interval_s
        try:
            report = await self.calls.sync_shards(self.shard_sync, leases)  # type: ignore[arg-type]
            if getattr(report, "changed", True):
                self.ownership.note_change()  # created or deleted leases: announced like any ownership change
            return report
        except KinesisSourceError as exc:
            if not _transient(exc):
                raise
            log.warning("worker %s: shard sync failed, retrying at the next interval: %s", self.worker_id, exc)
            return None

    def _where(self) -> str:
        t = self.table
        return f"stream {t.stream!r} (application {t.application!r}, table {t.table_name!r})"
