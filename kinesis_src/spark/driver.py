"""The driver-side state of one stream of a streaming query: clients, lineage, progress, lag.

One :class:`StreamDriver` per stream, never pickled (it holds sockets and a heartbeat thread).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Mapping, Sequence

from lineage import LineageError, shard_sort_key

from ..aws import KinesisClient
from ..discovery import ShardDiscovery
from ..errors import IteratorExpiredError, LineageListingError, ShardNotFoundError
from ..identity import StreamIdentity
from ..leases.claim import QueryClaim
from ..positions import Position
from ..retrieval.registration import ConsumerMode, FanOutTarget, deregister, register
from ..stream_ref import StreamRef
from .frontier import TRIMMED_STOP, BatchEnd, Frontier
from .lineage_walks import ImpliedDrained, LineageRanks
from .offsets import Plan
from .options import SourceOptions
from .plan_store import PlanBook, PlanStore
from .planner import admit_ready, advance
from .probes import IdleProber
from .progress_log import ProgressLog, driver_progress_log, open_lease_table
from .retention import (
    checkpointed_sequence,
    drop_trimmed,
    partly_trimmed_message,
    settle_partial_trims,
    shards_to_verify,
    trimmed_message,
)
from .task_figures import ShardTotals

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_S = 30.0  # full ListShards: new shards, and frontier shards trimmed whole
VERIFY_INTERVAL_S = 60.0  # a shard lagging near retention has its position probed at most this often


class StreamDriver:
    """Everything the driver keeps between calls: clients, graph, progress cache, probes, lag."""

    def __init__(
        self,
        options: SourceOptions,
        kinesis: KinesisClient | None = None,
        progress: ProgressLog | None = None,
        claim: QueryClaim | None = None,
        plans: PlanStore | None = None,
        stream: StreamRef | None = None,
    ) -> None:
        """``kinesis``, ``progress``, ``claim`` and ``plans`` replace the real clients in unit tests.

        ``stream`` is the stream this driver reads (default: the first of the options').
        Without a lease table (fakes for progress and claim, no ``plans``) every offset is inline.
        """
        self.options = options
        self.stream = stream or options.streams[0]
        self.name = self.stream.name  # keys (lease table, offsets) and messages
        target = self.stream.target  # calls: by name, or by ARN
        self.kinesis = kinesis or KinesisClient(options.aws_settings())
        # Described once per driver process: the identity every offset is checked against, and
        # the retention period partial-trim checks compare lag with. Before the claim, so a
        # recreated stream fails at once instead of after waiting out an old claim.
        self.summary = self.kinesis.describe_stream(target)
        self.discovery = ShardDiscovery(self.kinesis, target)
        if progress is None or claim is None:
            leases = open_lease_table(
                options.aws_settings(), options.lease_table_name, options.application_name, self.name
            )
            claim = claim or QueryClaim(leases)
            progress = progress or driver_progress_log(leases)
            plans = plans or PlanStore.of(leases)
        self.plans = PlanBook(plans)  # offsets <-> plans: large plans are stored, the offset names them
        self.claim = claim
        self.claim.acquire()
        self.fan_out = self._register_fan_out()
        self.progress = progress
        self.lag: dict[str, int] = {}
        self.records_read: dict[str, int] = {}  # per shard, the batches' recorded counts since this driver started
        self.read_totals = ShardTotals.empty()  # per shard, the same batches' recorded bytes, throttles, retries
        self.trimmed: set[str] = set()  # shards skipped whole (failOnDataLoss=false), for reportLatestOffset
        self.partly_trimmed: set[tuple[str, str]] = set()  # (shard, checkpointed sequence number) skipped past
        self._ends: dict[tuple[str, int], dict[str, BatchEnd]] = {}
        self.ranks = LineageRanks()  # partitions() order, kept across batches
        self.implied = ImpliedDrained()  # drained shards the offset leaves out, kept across idle triggers
        self.prober = IdleProber(self.kinesis, target, options.idle_poll_interval_ms / 1000)
        self._listed: frozenset[str] = frozenset()  # shard ids of the last full listing
        self._listed_at = -math.inf
        self._verified_at: dict[str, float] = {}  # shard -> when its position was last checked for a trim
        self._restart_checked = False
        self._unchecked: set[str] = set()  # after a restart: positions not checked for a partial trim yet
        self.held: frozenset[str] = frozenset()  # shards waiting for that check: neither read nor probed
        self._planned: tuple[str, int] | None = None  # (run, batch) of the last plan latestOffset made here
        self._replay_checked: tuple[str, int] | None = None  # (run, batch) of a replayed plan already checked

    @property
    def identity(self) -> StreamIdentity | None:
        """The stream as it is now (None from endpoints that do not report a creation time)."""
        return self.summary.identity

    def _register_fan_out(self) -> FanOutTarget | None:
        """consumerMode=efo: the stream consumer every task subscribes with, registered once per driver."""
        opts = self.options
        if opts.consumer_mode is not ConsumerMode.EFO:
            return None
        try:
            return register(self.kinesis, self.stream.target, opts.consumer_name, stream_arn=self.summary.arn)
        except BaseException:
            self.claim.release()
            raise

    def close(self) -> None:
        self.prober.close()
        try:
            if self.fan_out is not None and self.options.require_consumer_deregistration:
                deregister(self.kinesis, self.fan_out)
        finally:
            self.claim.release()

    def data_loss(self) -> dict[str, int]:
        return {"trimmedShards": len(self.trimmed), "partlyTrimmedShards": len(self.partly_trimmed)}

    # -- shards ------------------------------------------------------------------------

    def initial_frontier(self, start: Position) -> Frontier:
        initial = self.discovery.refresh(start)
        self._listed = frozenset(self.discovery.graph.shard_ids())
        self._listed_at = time.monotonic()
        self._restart_checked = True  # a fresh start: no checkpointed position to verify
        empty = Frontier({}, {}, frozenset())
        return admit_ready(
            empty, self.discovery.graph, self.options.preserve_shard_order, {s: start for s in initial}, start,
            key_range=self.options.key_range,
        )

    def frontier_after(self, plan: Plan, budgeted: bool = True) -> Frontier:
        """The frontier after ``plan`` ran: trimmed shards dealt with, ready children admitted.

        ``budgeted``: shards whose partial-trim check did not start within the probe budget are
        :attr:`held` (neither read nor probed). AvailableNow passes False: it must not end early.
        """
        self.prober.new_round()  # the listing, the checks and the probes of this trigger share one budget
        ends = self.batch_ends(plan)
        frontier = advance(plan, ends)
        for sid, end in ends.items():
            if end.millis_behind_latest is not None:
                self.lag[sid] = end.millis_behind_latest
            if end.stop_reason == TRIMMED_STOP:  # a task found it gone (failOnDataLoss=false)
                self.trimmed.add(sid)
        ended = any(e.shard_end for e in ends.values())
        self._refresh(force=ended or len(self.discovery.graph) == 0)
        frontier = self._drop_trimmed(frontier)
        frontier = self._verify_positions(frontier, budgeted)
        frontier = self.implied.apply(frontier, self.discovery.graph)  # offsets list only what it does not imply
        frontier = admit_ready(
            frontier, self.discovery.graph, self.options.preserve_shard_order, key_range=self.options.key_range
        )
        self._forget_gone(frontier)
        return frontier

    def _forget_gone(self, frontier: Frontier) -> None:
        """Forget the lag and check times of shards that left the frontier; read totals stay."""
        live = frontier.positions.keys()
        for figures in (self.lag, self._verified_at):
            for sid in [s for s in figures if s not in live]:
                del figures[sid]

    def _refresh(self, force: bool) -> None:
        """A full listing (every DISCOVERY_INTERVAL_S, or now): new shards, and which old ones are gone."""
        if not force and time.monotonic() - self._listed_at < DISCOVERY_INTERVAL_S:
            return
        if len(self.discovery.graph) == 0:
            self.discovery.refresh()
            listed = self.discovery.graph.shard_ids()
        else:
            shards = self.kinesis.list_shards(self.stream.target)
            try:
                self.discovery.graph.update(shards)
            except LineageError as exc:
                raise LineageListingError(f"stream {self.stream!r}, full listing: {exc}") from exc
            listed = [s["ShardId"] for s in shards]
        self._listed = frozenset(listed)
        self._listed_at = time.monotonic()

    def _drop_trimmed(self, frontier: Frontier) -> Frontier:
        """Frontier shards the last listing no longer has: DataLossError, or skipped and counted."""
        stream, fail = self.name, self.options.fail_on_data_loss
        kept, trimmed = drop_trimmed(frontier, self._listed, fail, stream)
        fresh = [s for s in trimmed if s not in self.trimmed]
        if fresh:
            log.warning("%s; skipping them because failOnDataLoss=false", trimmed_message(stream, frontier, fresh))
            self.trimmed.update(fresh)
        return kept

    def _verify_positions(self, frontier: Frontier, budgeted: bool) -> Frontier:
        """Check positions that may have been trimmed in part (after a restart; lag near retention).

        Shards not checked within the budget stay in ``_unchecked``, held until a later trigger.
        """
        if not self._restart_checked:
            self._restart_checked = True
            retention = self.summary.retention_hours
            self._unchecked = set(shards_to_verify(frontier, self.lag, retention, after_restart=True))
        self._unchecked &= frontier.positions.keys()
        now = time.monotonic()
        lagging = [
            s
            for s in shards_to_verify(frontier, self.lag, self.summary.retention_hours, after_restart=False)
            if now - self._verified_at.get(s, -math.inf) >= VERIFY_INTERVAL_S
        ]
        due = sorted(self._unchecked.union(lagging), key=shard_sort_key)
        checks = self.prober.map(lambda sid: self._oldest_if_trimmed(sid, frontier.positions[sid]), due, budgeted)
        oldest: dict[str, str] = {}
        held = []
        for sid, check in zip(due, checks):
            if check is None:  # over budget: a later trigger checks it
                held.append(sid)
                continue
            found, lag = check
            self._unchecked.discard(sid)
            self._verified_at[sid] = now
            if lag is not None:
                self.lag[sid] = lag
            if found is not None:
                oldest[sid] = found
        self.held = frozenset(held)
        return self._settle(frontier, oldest)

    def _settle(self, frontier: Frontier, oldest: Mapping[str, str]) -> Frontier:
        """Positions whose record is gone (``oldest``: the oldest record left): DataLossError, or logged and counted."""
        if not oldest:
            return frontier
        stream = self.name
        settled = settle_partial_trims(frontier, oldest, self.options.fail_on_data_loss, stream)
        fresh = {s: q for s, q in oldest.items() if (s, checkpointed_sequence(frontier.positions[s])) not in self.partly_trimmed}
        if fresh:
            log.warning(
                "%s; continuing from the oldest record because failOnDataLoss=false",
                partly_trimmed_message(stream, frontier, fresh),
            )
        self.partly_trimmed.update((s, checkpointed_sequence(frontier.positions[s]) or "") for s in oldest)
        return settled

    def planned(self, plan: Plan) -> None:
        """``latestOffset`` made ``plan`` in this process: its starts were checked here or recorded by tasks."""
        self._planned = (plan.run, plan.batch)

    def check_replay(self, plan: Plan) -> None:
        """Check a plan this driver did not make (the uncommitted batch a restart re-runs first).

        Every read shard's start is checked for a partial trim before tasks read, with no budget.
        """
        key = (plan.run, plan.batch)
        if key in (self._planned, self._replay_checked):
            return
        starts = {sid: plan.shards[sid].start for sid in plan.read if checkpointed_sequence(plan.shards[sid].start)}
        due = sorted(starts, key=shard_sort_key)
        checks = self.prober.map(lambda sid: self._oldest_if_trimmed(sid, starts[sid]), due)
        oldest: dict[str, str] = {}
        for sid, check in zip(due, checks):
            found, lag = check or (None, None)
            if lag is not None:
                self.lag[sid] = lag
            if found is not None:
                oldest[sid] = found
        self._settle(Frontier(starts, {}, frozenset()), oldest)
        self._replay_checked = key

    def _oldest_if_trimmed(self, sid: str, position: Position) -> tuple[str | None, int | None]:
        """Read one record AT the position's sequence number S: another record means S was trimmed.

        Returns (that oldest record or None, the lag reported); an empty answer proves nothing.
        Runs on a pool thread and changes nothing (docs/spark.md, "Data loss").
        """
        seq = checkpointed_sequence(position)
        assert seq is not None
        stream = self.stream.target
        try:
            iterator = self.kinesis.get_shard_iterator(stream, sid, Position.at_sequence(seq))
            page = self.kinesis.get_records(iterator, 1, sid, stream)
        except (ShardNotFoundError, IteratorExpiredError):
            return None, None  # gone whole: the next listing (or the task) deals with it
        if len(page) and int(page.sequence_numbers[0]) != int(seq):
            return page.sequence_numbers[0], page.millis_behind_latest
        return None, page.millis_behind_latest

    # -- progress ------------------------------------------------------------------------

    def batch_ends(self, plan: Plan) -> dict[str, BatchEnd]:
        if plan.batch == 0 or not plan.read:
            return {}
        key = (plan.run, plan.batch)
        if key not in self._ends:  # once per batch, however often Spark asks: counted once
            self._ends[key] = self.progress.ends(plan.run, plan.batch)
            self.prober.read_by_task(self._ends[key])
            for sid, end in self._ends[key].items():
                self.records_read[sid] = self.records_read.get(sid, 0) + end.record_count
                self.read_totals.add(sid, end)
        return self._ends[key]

    def forget_before(self, committed: Mapping[str, Any]) -> None:
        """Spark committed the batch of offset ``committed``: drop what only earlier batches needed."""
        run, batch = Plan.batch_in(committed)
        for key in [k for k in self._ends if k[0] == run and k[1] < batch]:
            del self._ends[key]
        self.progress.purge_before(run, batch)
        self.plans.forget_before(committed)

    # -- probes --------------------------------------------------------------------------

    def probe(self, shard_ids: Sequence[str], positions: Mapping[str, Position]) -> dict[str, bool]:
        """One GetRecords(Limit=1) per idle shard that is due (see :mod:`.probes`), many at once."""
        found: dict[str, bool] = {}
        for sid, result in self.prober.probe(shard_ids, positions).items():
            if result.millis_behind_latest is not None:
                self.lag[sid] = result.millis_behind_latest
            if result.gone:  # trimmed since the last listing: list again now, and let a task meet it
                self._listed_at = -math.inf
            found[sid] = result.has_data
        return found
