"""What a coordinator cycle changes: judge the workers, reconcile the held set, balance, end shards.

Leases move gracefully (shed, handed over); a forced steal, which redelivers records, is the last
resort (:mod:`.steal_requests`). Rules: docs/leases.md, "Assignment"."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Sequence

from lineage import shard_sort_key

from ..errors import KinesisSourceError, LeaseLostError
from ..records import ChildShard
from .assignment import plan_assignment
from .cycle_report import CycleReport
from .expiry import ExpiryJudge, Observation
from .held_leases import HeldLeases
from .listener import LeaseListener
from .model import Lease, ShardEndResult, TableView, WorkerHeartbeat
from .renewal import HeartbeatRenewal
from .table_calls import TableCalls
from .throughput import lease_weights
from .timing import LeaseTiming

if TYPE_CHECKING:
    from .view import ViewReader

log = logging.getLogger(__name__)

STALE_AFTER_LOST_RACES = 2  # takes lost in a row before the rest of a cycle's takes wait for a fresh view
SyncLeases = Callable[[Iterable[Lease]], Awaitable[object | None]]


class Ownership:
    """The steps that change who holds what, over the worker's one held set (:mod:`.held_leases`).
    ``sync``: the coordinator's shard sync (None without one), run when a merge child's other
    parent has no lease yet; ``wake``: runs the next cycle now (a shard ended: children wait)."""

    def __init__(
        self, worker_id: str, timing: LeaseTiming, clock: Callable[[], float], *, held: HeldLeases,
        calls: TableCalls, views: ViewReader, renewal: HeartbeatRenewal, listener: LeaseListener,
        is_live: Callable[[], bool], now_ms: Callable[[], int], where: str, preserve_shard_order: bool = True,
        sync: SyncLeases | None = None, wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.worker_id = worker_id
        self.timing = timing
        self.clock = clock
        self.held = held
        self.calls = calls
        self.views = views
        self.renewal = renewal
        self.listener = listener
        self.is_live = is_live
        self.now_ms = now_ms
        self.where = where  # the table, application and stream, for errors
        self.preserve_shard_order = preserve_shard_order
        self.sync = sync
        self.wake = wake
        self.judge = ExpiryJudge(timing.failover_s, clock)

    def lease(self, shard_id: str) -> Lease:
        lease = self.held.lease(shard_id)
        if lease is None:
            raise LeaseLostError(
                f"worker {self.worker_id} does not hold the lease on shard {shard_id} of {self.where} "
                "(never taken, or lost); stop processing the shard",
                shard_id,
            )
        return lease

    def held_at(self, shard_id: str, counter: int | None, what: str) -> Lease:
        """The lease held on ``shard_id``; LeaseLostError, nothing written, if ``counter`` (the holding a
        write comes from) is not the counter held now: this worker took the shard again meanwhile, and
        the newer holding reads it again from the last checkpoint and makes its own writes."""
        lease = self.lease(shard_id)
        if counter is not None and lease.counter != counter:
            raise LeaseLostError(
                f"worker {self.worker_id}: {what} of shard {shard_id} comes from its holding at lease counter "
                f"{counter}, but the lease is held again at counter {lease.counter}; nothing was written, and "
                "the newer holding writes its own",
                shard_id,
            )
        return lease

    async def end_shard(self, shard_id: str, children: Sequence[ChildShard | Lease], counter: int | None = None,
                        ) -> ShardEndResult:
        """The shard was read to its end: create child leases, mark it SHARD_END, give it up.
        ``counter``: the holding that read it; a lease held at another counter now (a newer holding)
        raises LeaseLostError, and nothing is written."""
        lease = self.held_at(shard_id, counter, "SHARD_END")
        child_leases = [c if isinstance(c, Lease) else Lease.for_child(c) for c in children]
        await self._lease_co_parents(shard_id, child_leases)
        try:
            result = await self.calls.mark_shard_end(lease, child_leases)
        except LeaseLostError:
            self.drop(lease, "SHARD_END rejected: lease taken over")
            self.views.invalidate()  # the table changed unannounced (or unseen yet): read it again
            raise
        self.held.let_go(shard_id)
        self.note_change()
        log.info(
            "worker %s: shard %s reached SHARD_END; children %s (created %s)",
            self.worker_id, shard_id, ", ".join(result.lease.child_shard_ids) or "none",
            ", ".join(result.created_children) or "none",
        )
        self.wake()
        return result

    async def _lease_co_parents(self, shard_id: str, children: Sequence[Lease]) -> None:
        """Before a merge child gets its lease, its other parent must have one: a parent without a
        lease counts as drained, so the child would be read first. Runs a shard sync (parents
        first) only when a co-parent is missing."""
        co_parents = {p for child in children for p in child.parent_shard_ids if p != shard_id}
        if not co_parents or self.sync is None:
            return
        leases = await self.calls.list_leases()
        if co_parents <= {l.shard_id for l in leases}:
            return
        await self.sync(leases)
        still = sorted(co_parents - {l.shard_id for l in await self.calls.list_leases()}, key=shard_sort_key)
        if still:
            log.warning(
                "worker %s: shard %s ends, but merge parent(s) %s of its child have no lease (shard sync "
                "failed or they were trimmed); the child may start before them", self.worker_id, shard_id,
                ", ".join(still),
            )

    async def judge_workers(self, view: TableView, report: CycleReport) -> set[str]:
        """Live workers by the one judge (this worker is); expired ones are declared dead (a conditional delete)."""
        others = {w: (b.session, b.heartbeat) for w, b in view.workers.items() if w != self.worker_id}
        live = {self.worker_id}
        for worker_id, seen in self.judge.observe_all(others).items():
            if not seen.expired or not await self._declare_dead(view.workers[worker_id], seen, report):
                live.add(worker_id)
        return live

    async def _declare_dead(self, beat: WorkerHeartbeat, seen: Observation, report: CycleReport) -> bool:
        """Delete the expired heartbeat ``beat``; False if it was renewed after our scan (the worker is live)."""
        if not await self.calls.declare_worker_dead(beat):
            return False
        log.info(
            "worker %s declared worker %s dead: heartbeat %d unchanged for %.1fs",
            self.worker_id, beat.worker_id, beat.heartbeat, seen.unchanged_s,
        )
        report.declared_dead.append(beat.worker_id)
        self.judge.forget(beat.worker_id)
        return True

    async def reconcile(self, view: TableView, report: CycleReport) -> None:
        """Make the held set agree with the table: drop what others own, adopt what names us."""
        for shard_id, lease in self.held.leases().items():
            current = view.leases.get(shard_id)
            if self._older_than_mine(current, lease, view):
                continue  # a cached view from before this worker's own write: it knows better
            if current is None or current.owner != self.worker_id:
                reason = "lease deleted" if current is None else f"taken by {current.owner or 'nobody'}"
                self.drop(lease, reason, report)
            elif current.counter != lease.counter:
                self.held.update(current)
        held = self.held.leases()
        for shard_id, lease in view.leases.items():
            if lease.owner == self.worker_id and shard_id not in held and not lease.is_shard_end:
                if not await self.take(lease, "adopted (owned by this worker id)", report) and not self.is_live():
                    return

    def _older_than_mine(self, current: Lease | None, held: Lease, view: TableView) -> bool:
        """The view predates this worker's own write to the lease (a take, adopted or not): its
        counter is below ours (counters only grow), or it is missing from a view read before we
        took it. Lease reads are spaced out at scale (docs/leases.md, "Assignment")."""
        if current is not None:
            return current.counter < held.counter
        return self.views.read_at <= self.held.acquired_at(held.shard_id)

    async def balance(self, view: TableView, live: set[str], report: CycleReport) -> tuple[Lease, ...] | None:
        """Shed, hand over and take as planned; the leases the plan would steal, or None if it stopped early
        (nothing of the steals is done then)."""
        if not self.is_live():
            log.debug("worker %s: heartbeat overdue or deleted: takes, steals and sheds nothing", self.worker_id)
            return None
        mine = self.held.leases()
        leases = [mine.get(sid, lease) for sid, lease in view.leases.items()]
        plan = plan_assignment(
            self.worker_id, leases, live,
            preserve_shard_order=self.preserve_shard_order, max_steals=self.timing.max_steals_per_cycle,
            weights=lease_weights(leases, self.now_ms()),
        )
        hand_to = dict(plan.hand_to)
        for lease in plan.release:
            taker = hand_to.get(lease.shard_id)
            why = f"shedding: above fair share of {plan.assignable} over {plan.workers}" if taker is None \
                else f"handed over to starving worker {taker}"
            if await self.release(lease, why, taker=taker):
                report.released.append(lease.shard_id)
        lost_in_a_row = 0
        for lease in plan.take:
            if not self.is_live():  # the takes outlasted the heartbeat (throttled writes): stop here
                return None
            how = "unowned" if lease.owner is None else f"from dead worker {lease.owner}"
            lost_in_a_row = 0 if await self.take(lease, how, report) else lost_in_a_row + 1
            if lost_in_a_row >= STALE_AFTER_LOST_RACES:  # others took what this view shows free:
                self.views.invalidate()  # stop, and plan again next cycle on a fresh read
                return None
        return plan.steal

    async def take(self, lease: Lease, how: str, report: CycleReport, victim: str | None = None,
                 incarnation: int | None = None) -> bool:
        """Take and hold ``lease`` (fenced on its owner and counter), only while this worker is
        live. A take in flight when this worker learnt it was declared dead is not held (the next
        cycle re-takes it); ``incarnation``: a forced steal's request's, checked the same way."""
        held = self.held
        incarnation = held.incarnation if incarnation is None else incarnation
        if not self.is_live():
            return False
        if incarnation != held.incarnation:  # checked after is_live(): a worker live again after its death has a new one
            return False
        taken = await self.calls.take_lease(lease, self.worker_id)
        if taken is None:
            log.debug("worker %s lost the race for %s", self.worker_id, lease.shard_id)
            report.lost_races.append(lease.shard_id)
            return False
        kept = held.hold(taken, self.clock(), incarnation)
        self.note_change(() if victim is None else (victim,))
        if not kept:
            log.info("worker %s took %s as it learnt it had been declared dead: not held", self.worker_id,
                     lease.shard_id)
            return False
        log.info("worker %s took lease on %s (%s) at checkpoint %s", self.worker_id, lease.shard_id, how, taken.checkpoint)
        report.acquired.append(lease.shard_id)
        self.listener.on_acquired(taken)
        return True

    async def release(self, lease: Lease, why: str, notify: bool = True, taker: str | None = None) -> bool:
        """Give a held lease up (after the listener's checkpoint, with ``notify``); ``taker``: the starving
        worker it is handed to, named in the announcement so that it reads the leases at once."""
        if notify:
            try:
                await self.listener.before_release(lease)
            except Exception as exc:  # the release still happens: its checkpoint is simply older
                log.warning("worker %s: before_release(%s) failed: %s", self.worker_id, lease.shard_id, exc)
        current = self.held.let_go(lease.shard_id) or lease
        try:
            released = await self.calls.release_lease(current)
        except KinesisSourceError as exc:
            log.warning("worker %s: release of %s failed (%s); it will expire", self.worker_id, lease.shard_id, exc)
            return False
        if released is not None:
            self.note_change(() if taker is None else (taker,))
        log.info("worker %s released lease on %s (%s)", self.worker_id, lease.shard_id, why)
        return released is not None

    def note_change(self, notify: Iterable[str] = ()) -> None:
        """This worker changed lease ownership: announce it with the next heartbeat, naming the
        workers in ``notify`` (:mod:`.view`), and read the leases again next cycle either way."""
        self.renewal.note_change(notify)
        self.views.invalidate()

    def drop(self, lease: Lease, reason: str, report: CycleReport | None = None) -> None:
        """Forget a held lease: only the holding at ``lease``'s counter. A write fenced on an older
        holding (a checkpoint or SHARD_END that started before this worker took the shard again) says
        nothing about the newer one, which dropping would take from the consumer until re-adopted."""
        if self.held.let_go(lease.shard_id, lease.counter) is None:
            return
        log.info("worker %s lost lease on %s: %s", self.worker_id, lease.shard_id, reason)
        if report is not None:
            report.lost.append(lease.shard_id)
        self.listener.on_lost(lease, reason)

