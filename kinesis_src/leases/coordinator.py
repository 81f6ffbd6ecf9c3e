"""The lease coordinator a worker runs: heartbeat, scan, balance, and the held-lease set.

How it differs from the KCL, and why it is still safe
-----------------------------------------------------
The KCL renews every lease every failover/3 (a conditional write per lease:
18 writes per shard per minute at the 10 s default). Here a worker renews
*itself*: one heartbeat item per worker, one write per renewal interval,
whatever the number of shards it holds. Lease items change only when
ownership changes or a checkpoint is written.

* **Fencing** stays per lease: every ownership change increments the
  lease's ``leaseCounter``, and every write by a holder (checkpoint,
  SHARD_END, fenced progress) is conditional on (owner, counter), so a
  replaced holder can never write (:class:`~kinesis_src.errors.LeaseLostError`).
* **Expiry** is judged as the KCL does, by observation on the local
  clock (:class:`~.expiry.ExpiryJudge`): a worker is expired when its
  heartbeat (session, counter) has not changed for ``failover_s`` since this
  worker first saw that value. Wall clocks are never compared, so clock skew
  cannot expire a live worker. The local clock is CLOCK_BOOTTIME
  (:func:`kinesis_src.clock.since_boot`), which keeps counting while the
  host is suspended.
* **Declaring dead** is itself a conditional write: the observer deletes the
  heartbeat item only if it still holds the value observed. A heartbeat that
  lands late makes the delete fail, so a slow-but-alive worker is never
  declared dead. Once deleted, that worker's leases are free to take (each
  take still conditional on the lease's owner and counter), and the dead
  worker learns it at its next heartbeat (the conditional heartbeat fails),
  drops every lease and registers again.
* **Reading the table** (:mod:`.view`): every cycle reads the heartbeats
  (one small Query); the lease items only when some worker announced an
  ownership change in its heartbeat (``leaseChanges``, bumped by a heartbeat
  sent right after the change), when a worker appeared or went away, and at
  least every ``lease_refresh_interval_s``. Nothing above depends on that
  view being current: takes, steals, releases and deletes are conditional on
  the owner and counter read, so acting on a stale view only costs a failed
  conditional write. What the view does bound is how soon a victim notices a
  steal (``view_is_fresh``): the thief announces it, so the victim sees it at
  its next cycle, unless the thief died between its steal and its
  announcement; then the victim learns at its next checkpoint (rejected),
  when the thief's heartbeat is declared dead, or at the periodic re-read.
* **Self-doubt**: a worker knows when it sent its last acknowledged heartbeat
  (local clock). No one can declare it dead before ``failover_s`` has passed
  since then, so ``held()`` reports leases only inside that window; a worker
  that was paused (GC, SIGSTOP, a frozen VM) stops trusting its leases
  before anyone else may take them.

Balancing (:func:`plan_assignment`, pure) weighs each lease by its shard's
recent throughput, measured by its holder and written with its checkpoints
(:mod:`.throughput`); without estimates every lease weighs 1, and each live
worker gets between floor(N/W) and ceil(N/W) of the N assignable leases:
leases of dead workers first, then unowned ones. What follows is said in
counts; with weights, "above ceil" is "at or above the mean load even
without the lease", and a hand-over needs a load gap of twice the lease's
weight (hysteresis: no move is ever undone on a stable load). Rebalancing between live workers is graceful: a
worker above ceil(N/W) sheds its surplus itself, and when a worker is below
floor(N/W) with nothing free, the most loaded worker hands one lease over
(release after its listener checkpoints). A forced steal (at most
``max_steals_per_cycle``, from the most loaded worker) happens only if that
has not happened within 1.5 renewal intervals, e.g. because the loaded
worker runs an older view. Forced steals are what make a consumer see a
record twice (at-least-once), so they are the exception here, where the
KCL relies on them.
"""


from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from lineage import shard_sort_key

from ..clock import since_boot
from ..errors import (
    KinesisSourceError,
    LeaseLostError,
    LineageListingError,
    RetriesExhaustedError,
)
from ..names import validate_worker_id
from ..positions import Position
from ..records import ChildShard
from .assignment import plan_assignment
from .expiry import ExpiryJudge
from .listener import LeaseListener, NoListener, SyncsShards
from .model import (
    Checkpoint,
    HeartbeatStatus,
    Lease,
    ShardEndResult,
    TableView,
)
from .renewal import HeartbeatRenewal, RenewalMode
from .table import LeaseTable
from .throughput import RateMeter, lease_weights
from .timing import LeaseTiming
from .view import ViewReader

log = logging.getLogger(__name__)


@dataclass
class CycleReport:
    """What one :meth:`LeaseCoordinator.run_once` did; the worker loop logs it, tests read it."""

    heartbeat: HeartbeatStatus | None = None
    live_workers: tuple[str, ...] = ()
    declared_dead: list[str] = field(default_factory=list)
    acquired: list[str] = field(default_factory=list)
    stolen: list[str] = field(default_factory=list)
    lost_races: list[str] = field(default_factory=list)  # takes and steals whose condition failed
    released: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    synced: object | None = None
    held: tuple[str, ...] = ()
    read_leases: bool = False  # the lease items were read, not served from the cache (see .view)
    announced: bool = False  # a heartbeat announced this worker's ownership changes


# -- the coordinator ----------------------------------------------------------------

STALE_AFTER_LOST_RACES = 2  # takes lost in a row before the rest of a cycle's takes wait for a fresh view
STEAL_PATIENCE_RENEWALS = 1.5  # a wish to steal must last this many renewals before it is acted on
_FATAL_NOTE = "the lease coordinator stopped; fix the cause and restart the worker"


class LeaseCoordinator:
    """Keeps this worker's share of an application's leases on one stream.

    ``start()`` runs a background thread; ``run_once()`` is the same cycle,
    callable directly (tests, benchmarks, callers with their own loop).
    Thread-safe: the consumer's threads call :meth:`checkpoint`,
    :meth:`shard_ended` and :meth:`held` while the cycle runs.
    """

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
    ) -> None:
        self.table = table
        self.worker_id = validate_worker_id(worker_id)
        self.timing = timing
        self.preserve_shard_order = preserve_shard_order
        self.shard_sync = shard_sync
        self.listener: LeaseListener = listener or NoListener()
        self.on_cycle = on_cycle
        self.clock = clock
        self._lock = threading.RLock()
        self._held: dict[str, Lease] = {}
        self._meters: dict[str, RateMeter] = {}  # per held shard: what the consumer delivered
        self.renewal = HeartbeatRenewal(table, self.worker_id, timing, clock, self._declared_dead, self._where)
        self._cycle_report: CycleReport | None = None  # the cycle running now (in-cycle renewals report to it)
        self._next_sync = float("-inf")
        self._judge = ExpiryJudge(timing.failover_s, clock)
        self._steal_wanted_since: float | None = None
        self._views = ViewReader(table, timing, clock, table.known_partitions)
        self._last_scan = float("-inf")
        self._scanned_at = float("-inf")  # send time of the last scan that answered
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._renewal_wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewal_thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.cycles = 0

    # -- lifecycle ---------------------------------------------------------------------

    def register(self) -> None:
        """Write this process's heartbeat item; called by start() and after being declared dead."""
        self.renewal.register()

    def start(self, sync_now: bool = True) -> LeaseCoordinator:
        """Register, sync shards once (repairs a table the stream outgrew), cycle once, then loop:
        the cycle on one thread, the heartbeat renewal on another (:mod:`.renewal`)."""
        self.register()
        self.renew_on_own_schedule(self._renewal_wake.set)
        self._renewal_thread = threading.Thread(
            target=self._renewal_loop, name=f"lease-renewal-{self.worker_id}", daemon=True
        )
        self._renewal_thread.start()
        if sync_now and self.shard_sync is not None:
            self._sync()
        self.run_once()
        self._thread = threading.Thread(target=self._loop, name=f"leases-{self.worker_id}", daemon=True)
        self._thread.start()
        return self

    def renew_on_own_schedule(self, waker: Callable[[], None]) -> None:
        """From now on the cycle does not renew: whoever calls :meth:`renewal_step` does, and
        ``waker`` interrupts its wait when a change is to be announced."""
        self.renewal.waker = waker
        self.renewal.mode = RenewalMode.OWN_SCHEDULE

    def stop(self, release: bool = True, timeout_s: float = 30.0) -> None:
        """Stop the loops; then release held leases (graceful hand-off) and remove the heartbeat."""
        self._stop.set()
        self._wake.set()
        self._renewal_wake.set()
        for thread in (self._thread, self._renewal_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout_s)
        self.renewal.stop()
        if release:
            for lease in list(self._snapshot().values()):
                self._release(lease, "worker stopping")
        try:
            self.renewal.deregister()
        except KinesisSourceError as exc:
            log.warning("worker %s: could not remove its heartbeat item: %s", self.worker_id, exc)

    def __enter__(self) -> LeaseCoordinator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        """Run the next cycle now (e.g. after a shard ended, so its children are picked up)."""
        self._wake.set()

    # -- what the consumer uses ------------------------------------------------------------

    def held(self) -> dict[str, Lease]:
        """Leases this worker may process now; empty while its own heartbeat is overdue."""
        if not self.is_live():
            return {}
        return self._snapshot()

    def view_is_fresh(self) -> bool:
        """True while this worker has read the table recently enough to have seen any steal coming.

        A thief steals only after wanting to for ``STEAL_PATIENCE_RENEWALS``
        renewals, time in which the victim's own cycle hands the lease over
        gracefully. A worker whose scans stall (DynamoDB throttled or
        unreachable) cannot know it was stolen from, so the consumer delivers
        nothing from a view older than that window: a stolen lease's
        prefetched batches are not handed out after the thief checkpointed.
        """
        return self.clock() - self._scanned_at < STEAL_PATIENCE_RENEWALS * self.timing.renew_s

    def is_live(self) -> bool:
        """True while no other worker can have declared this one dead (local clock)."""
        return self.failure is None and self.renewal.is_live()

    def lease(self, shard_id: str) -> Lease:
        with self._lock:
            lease = self._held.get(shard_id)
        if lease is None:
            raise self._not_held(shard_id)
        return lease

    def report_throughput(self, shard_id: str, records: int, nbytes: int) -> None:
        """The consumer delivered ``records`` records of ``nbytes`` bytes from a held shard.

        Cheap (no I/O): the estimate is written with the shard's next
        checkpoint, and the balancer weighs leases by it (:mod:`.throughput`).
        """
        with self._lock:
            meter = self._meters.get(shard_id)
        if meter is not None:
            meter.add(records, nbytes, self.clock())

    def checkpoint(self, shard_id: str, checkpoint: Checkpoint | Position) -> Lease:
        """Record progress on a held shard, with its throughput estimate; LeaseLostError if the lease was taken."""
        if isinstance(checkpoint, Position):
            checkpoint = Checkpoint.from_position(checkpoint)
        lease = self.lease(shard_id)
        with self._lock:
            meter = self._meters.get(shard_id)
        estimate = None if meter is None else meter.rate(self.clock(), self.table.now_ms())
        try:
            updated = self.table.checkpoint(lease, checkpoint, estimate)
        except LeaseLostError:
            self._drop(lease, "checkpoint rejected: lease taken over")
            self._views.invalidate()  # the table changed unannounced (or unseen yet): read it again
            raise
        with self._lock:
            current = self._held.get(shard_id)
            if current is not None and current.counter == updated.counter:  # not released meanwhile
                self._held[shard_id] = updated
        return updated

    def shard_ended(self, shard_id: str, children: Sequence[ChildShard | Lease]) -> ShardEndResult:
        """The shard was read to its end: create child leases, mark it SHARD_END, give it up."""
        lease = self.lease(shard_id)
        child_leases = [c if isinstance(c, Lease) else Lease.for_child(c) for c in children]
        self._lease_co_parents(shard_id, child_leases)
        try:
            result = self.table.mark_shard_end(lease, child_leases)
        except LeaseLostError:
            self._drop(lease, "SHARD_END rejected: lease taken over")
            self._views.invalidate()  # the table changed unannounced (or unseen yet): read it again
            raise
        with self._lock:
            self._held.pop(shard_id, None)
            self._meters.pop(shard_id, None)
        self._note_change()
        log.info(
            "worker %s: shard %s reached SHARD_END; children %s (created %s)",
            self.worker_id, shard_id, ", ".join(result.lease.child_shard_ids) or "none",
            ", ".join(result.created_children) or "none",
        )
        self.wake()
        return result

    def _lease_co_parents(self, shard_id: str, children: Sequence[Lease]) -> None:
        """Before a merge child gets its lease, its other parent must have one.

        :func:`~.assignment.is_assignable` counts a parent without a lease as
        drained (trimmed), so a merge child created while its other parent is
        still unleased (a split child whose own parent is being read, leased
        only at the next shard sync) would be read before that parent. A
        shard sync creates the missing leases, parents first (put-if-absent
        in shard-id order); it runs only when a co-parent is missing.
        """
        co_parents = {p for child in children for p in child.parent_shard_ids if p != shard_id}
        if not co_parents or self.shard_sync is None:
            return
        leases = self.table.list_leases()
        if co_parents <= {l.shard_id for l in leases}:
            return
        self._sync(leases)
        still = sorted(co_parents - {l.shard_id for l in self.table.list_leases()}, key=shard_sort_key)
        if still:
            log.warning(
                "worker %s: shard %s ends, but merge parent(s) %s of its child have no lease (shard sync "
                "failed or they were trimmed); the child may start before them", self.worker_id, shard_id,
                ", ".join(still),
            )

    def release(self, shard_id: str) -> bool:
        """Give one held lease up now (the caller has checkpointed)."""
        return self._release(self.lease(shard_id), "released by the consumer", notify=False)

    # -- the cycle ------------------------------------------------------------------------

    def run_once(self) -> CycleReport:
        """Heartbeat (if due), scan, reconcile, sync (if leader and due), balance."""
        report = self._cycle_report = CycleReport()
        self._last_scan = self.clock()
        in_cycle = self.renewal.mode is RenewalMode.IN_CYCLE
        if in_cycle:
            report.heartbeat = self.renewal.renew_if_due()
        view, report.read_leases = self._views.read()
        self._scanned_at = self._last_scan
        live = self._judge_workers(view, report)
        self._reconcile(view, report)
        if self._sync_due(live):
            view, report.read_leases = self._views.read(force=True)  # sync reads leases before listing
            report.synced = self._sync(view.leases.values())
            if self.renewal.change_pending:
                view, _ = self._views.read(force=True)
            self._reconcile(view, report)
        self._balance(view, live, report)
        if in_cycle and self.renewal.change_pending:
            report.announced = self.renewal.renew() is HeartbeatStatus.RENEWED
        elif not in_cycle:
            report.heartbeat = self.renewal.take_status()
        self._cycle_report = None
        report.live_workers = tuple(sorted(live))
        report.held = tuple(sorted(self._snapshot(), key=shard_sort_key))
        self.cycles += 1
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _loop(self) -> None:
        while not self._stop.is_set() and self.failure is None:
            try:
                self.run_once()
            except KinesisSourceError as exc:
                if not _transient(exc):
                    self._fail(exc)
                    return
                log.warning("worker %s: lease cycle failed, retrying next cycle: %s", self.worker_id, exc)
            except Exception as exc:  # a bug: stop loudly rather than hold leases without renewing
                self._fail(exc)
                return
            self._wake.wait(max(0.01, self._next_wake() - self.clock()))
            self._wake.clear()

    def _fail(self, error: BaseException) -> None:
        self.failure = error
        log.error("worker %s: %s: %s", self.worker_id, _FATAL_NOTE, error)
        for lease in list(self._snapshot().values()):
            self._drop(lease, f"coordinator stopped: {type(error).__name__}")

    def _next_wake(self) -> float:
        """Next scan, the moment a watched worker would expire, or (renewing in the cycle) the next
        heartbeat: the first."""
        wake = min(self._last_scan + self.timing.scan_s, self._judge.next_expiry())
        if self.renewal.mode is RenewalMode.IN_CYCLE:
            wake = min(wake, self.renewal.next_due)
        return wake

    # -- the renewal, on its own schedule ----------------------------------------------------

    def _renewal_loop(self) -> None:
        while not self._stop.is_set() and self.failure is None:
            wait_s = self.renewal_step()
            if wait_s is None:
                return
            self._renewal_wake.wait(wait_s)
            self._renewal_wake.clear()

    def renewal_step(self) -> float | None:
        """Renew if due (or a change waits to be announced); the seconds until the next step, None
        once the coordinator failed. One call per wake-up of the renewal loop (a thread, or a
        simulated process)."""
        try:
            self.renewal.renew_if_due()
        except KinesisSourceError as exc:
            if not _transient(exc):
                self._fail(exc)
                return None
            log.warning("worker %s: heartbeat failed, retrying: %s", self.worker_id, exc)
            return min(1.0, self.timing.renew_s / 4)
        except Exception as exc:  # noqa: BLE001 - a bug: stop loudly rather than hold leases without renewing
            self._fail(exc)
            return None
        return max(0.01, self.renewal.seconds_to_next())

    def _declared_dead(self) -> None:
        """Another worker deleted our heartbeat: every lease may be someone else's by now."""
        for lease in list(self._snapshot().values()):
            self._drop(lease, "this worker was declared dead", self._cycle_report)

    def _judge_workers(self, view: TableView, report: CycleReport) -> set[str]:
        """Live workers; expired ones are declared dead (a conditional delete) here."""
        live = {self.worker_id}
        self._judge.retain(view.workers)
        for worker_id, beat in view.workers.items():
            if worker_id == self.worker_id:
                continue
            seen = self._judge.observe(worker_id, (beat.session, beat.heartbeat))
            if not seen.expired:
                live.add(worker_id)
            elif self.table.declare_worker_dead(beat):
                log.info(
                    "worker %s declared worker %s dead: heartbeat %d unchanged for %.1fs",
                    self.worker_id, worker_id, beat.heartbeat, seen.unchanged_s,
                )
                report.declared_dead.append(worker_id)
                self._judge.forget(worker_id)
            else:
                live.add(worker_id)  # it renewed after our scan
        return live

    def _reconcile(self, view: TableView, report: CycleReport) -> None:
        """Make the held set agree with the table: drop what others own, adopt what names us."""
        for shard_id, lease in list(self._snapshot().items()):
            current = view.leases.get(shard_id)
            if current is None or current.owner != self.worker_id:
                reason = "lease deleted" if current is None else f"taken by {current.owner or 'nobody'}"
                self._drop(lease, reason, report)
            elif current.counter != lease.counter:
                with self._lock:
                    self._held[shard_id] = current
        held = self._snapshot()
        for shard_id, lease in view.leases.items():
            if lease.owner == self.worker_id and shard_id not in held and not lease.is_shard_end:
                self._acquire(lease, "adopted (owned by this worker id)", report)

    def _balance(self, view: TableView, live: set[str], report: CycleReport) -> None:
        mine = self._snapshot()
        leases = [mine.get(sid, lease) for sid, lease in view.leases.items()]
        plan = plan_assignment(
            self.worker_id, leases, live,
            preserve_shard_order=self.preserve_shard_order, max_steals=self.timing.max_steals_per_cycle,
            weights=lease_weights(leases, self.table.now_ms()),
        )
        for lease in plan.release:
            if self._release(lease, f"shedding: above fair share of {plan.assignable} over {plan.workers}"):
                report.released.append(lease.shard_id)
        lost_in_a_row = 0
        for lease in plan.take:
            how = "unowned" if lease.owner is None else f"from dead worker {lease.owner}"
            lost_in_a_row = 0 if self._acquire(lease, how, report) else lost_in_a_row + 1
            if lost_in_a_row >= STALE_AFTER_LOST_RACES:  # others took what this view shows free:
                self._views.invalidate()  # stop, and plan again next cycle on a fresh read
                return
        for lease in self._patient(plan.steal, progressed=bool(report.acquired)):
            if self._acquire(lease, f"stolen from {lease.owner}", report):
                report.stolen.append(lease.shard_id)

    def _patient(self, steals: tuple[Lease, ...], progressed: bool) -> tuple[Lease, ...]:
        """Steal only if the wish outlasts 1.5 renewals: the victim gets a cycle to shed gracefully.

        Patience restarts whenever this cycle took a lease (``progressed``): the
        others are handing leases over (or freeing them), just more slowly than
        one per renewal, and a forced steal would only add a duplicate delivery.
        """
        if not steals:
            self._steal_wanted_since = None
            return ()
        now = self.clock()
        if self._steal_wanted_since is None or progressed:
            self._steal_wanted_since = now
        if now - self._steal_wanted_since < STEAL_PATIENCE_RENEWALS * self.timing.renew_s:
            return ()
        self._steal_wanted_since = None
        return steals

    def _acquire(self, lease: Lease, how: str, report: CycleReport) -> bool:
        taken = self.table.take_lease(lease, self.worker_id)
        if taken is None:
            log.debug("worker %s lost the race for %s", self.worker_id, lease.shard_id)
            report.lost_races.append(lease.shard_id)
            return False
        with self._lock:
            self._held[lease.shard_id] = taken
            self._meters[lease.shard_id] = RateMeter(self.clock())
        self._note_change()
        log.info("worker %s took lease on %s (%s) at checkpoint %s", self.worker_id, lease.shard_id, how, taken.checkpoint)
        report.acquired.append(lease.shard_id)
        self.listener.on_acquired(taken)
        return True

    def _release(self, lease: Lease, why: str, notify: bool = True) -> bool:
        if notify:
            try:
                self.listener.before_release(lease)
            except Exception as exc:  # the release still happens: its checkpoint is simply older
                log.warning("worker %s: before_release(%s) failed: %s", self.worker_id, lease.shard_id, exc)
        current = self._snapshot().get(lease.shard_id, lease)
        with self._lock:
            self._held.pop(lease.shard_id, None)
            self._meters.pop(lease.shard_id, None)
        try:
            released = self.table.release_lease(current)
        except KinesisSourceError as exc:
            log.warning("worker %s: release of %s failed (%s); it will expire", self.worker_id, lease.shard_id, exc)
            return False
        if released is not None:
            self._note_change()
        log.info("worker %s released lease on %s (%s)", self.worker_id, lease.shard_id, why)
        return released is not None

    def _note_change(self) -> None:
        """This worker changed lease ownership: announce it with the next heartbeat (sent at the end
        of this cycle, or at once by the renewal loop), and read the leases again next cycle whether
        that announcement lands or not."""
        self.renewal.note_change()
        self._views.invalidate()

    def _drop(self, lease: Lease, reason: str, report: CycleReport | None = None) -> None:
        with self._lock:
            self._meters.pop(lease.shard_id, None)
            if self._held.pop(lease.shard_id, None) is None:
                return
        log.info("worker %s lost lease on %s: %s", self.worker_id, lease.shard_id, reason)
        if report is not None:
            report.lost.append(lease.shard_id)
        self.listener.on_lost(lease, reason)

    def _sync_due(self, live: set[str]) -> bool:
        if self.shard_sync is None or self.clock() < self._next_sync:
            return False
        return min(live) == self.worker_id

    def _sync(self, leases: Iterable[Lease] | None = None) -> object | None:
        self._next_sync = self.clock() + self.timing.sync_interval_s
        try:
            report = self.shard_sync.run(leases)  # type: ignore[union-attr]
            if getattr(report, "changed", True):
                self._note_change()  # created or deleted leases: announced like any ownership change
            return report
        except KinesisSourceError as exc:
            if not _transient(exc):
                raise
            log.warning("worker %s: shard sync failed, retrying at the next interval: %s", self.worker_id, exc)
            return None

    def _snapshot(self) -> dict[str, Lease]:
        with self._lock:
            return dict(self._held)

    def _not_held(self, shard_id: str) -> LeaseLostError:
        return LeaseLostError(
            f"worker {self.worker_id} does not hold the lease on shard {shard_id} of {self._where()} "
            "(never taken, or lost); stop processing the shard",
            shard_id,
        )

    def _where(self) -> str:
        t = self.table
        return f"stream {t.stream!r} (application {t.application!r}, table {t.table_name!r})"


def _transient(error: BaseException) -> bool:
    """Errors worth another cycle: the retry budget ran out on something retriable, or a
    listing caught mid-reshard. Corrupt items, missing tables, permissions: fatal."""
    if isinstance(error, RetriesExhaustedError):
        return True
    if isinstance(error, LineageListingError):
        return True
    return isinstance(error, KinesisSourceError) and error.retriable

