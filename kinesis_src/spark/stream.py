"""``spark.readStream.format("kinesis")``: the micro-batch stream reader.

Driver side (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``)
runs in one long-lived Python process per query run, so clients, the
lineage graph and probe iterators are cached on a lazily created
:class:`_Driver` that is never pickled. Executors get a fresh copy of this
reader without it and build their own clients in ``read()``.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..aws import KinesisClient
from ..discovery import ShardDiscovery
from ..errors import DataLossError, IteratorExpiredError
from ..leases.claim import QueryClaim
from ..leases.progress import ProgressStore
from ..positions import Position, PositionKind, format_timestamp
from .batch import endpoint_of
from .offsets import Plan, ShardPlan
from .options import SourceOptions
from .partitions import KinesisPartition, ShardSlice
from .planner import (
    BatchEnd,
    Frontier,
    admit_ready,
    advance,
    for_trigger,
    idle_shards,
    lineage_rank,
    next_plan,
    prune_drained,
)
from .progress_log import ProgressLog, open_lease_table
from .tasks import read_stream_partition

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_S = 30.0


class KinesisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict[str, Any] | None = None
        self._cut: str | None = None
        self._driver: _Driver | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_driver"] = None  # clients and sockets stay on the driver
        return state

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self.options)
        return self._driver

    # -- offsets -------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """The plan before the first batch: every ready shard at the initial position, none read yet.

        Spark calls this twice on a fresh start; the cached answer keeps the run id stable.
        ``latest`` becomes "arrived at or after the query started", so a replay of the first
        batch starts where the original did.
        """
        if self._initial is None:
            start = self.options.initial_position
            if start.kind is PositionKind.LATEST:
                start = Position.at_timestamp(datetime.now(timezone.utc))
            frontier = self.driver.initial_frontier(start)
            plan = Plan(
                run=uuid.uuid4().hex,
                batch=0,
                shards={sid: ShardPlan(pos, 0) for sid, pos in frontier.positions.items()},
                drained=frontier.drained,
            )
            self._initial = plan.to_offset()
            log.info("kinesis stream %r: new run %s over %d shard(s)", self.options.stream_name, plan.run, len(plan.shards))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cut = format_timestamp(datetime.now(timezone.utc))
        log.info("AvailableNow: reading records that arrived up to %s", self._cut)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        plan = Plan.from_offset(start)
        driver = self.driver
        frontier = for_trigger(plan, driver.frontier_after(plan), self._cut)  # before probing: see its doc
        has_data = driver.probe(idle_shards(frontier), frontier.positions) if self._cut is None else {}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        nxt = next_plan(plan, frontier, has_data, self.options.max_records_per_shard, max_rows, self._cut)
        if nxt is None:
            return start
        nxt = prune_drained(nxt, driver.discovery.graph)
        log.info("kinesis stream %r: batch %d reads %d shard(s)", self.options.stream_name, nxt.batch, len(nxt.read))
        return nxt.to_offset()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if self._driver is None:
            return None
        return {"millisBehindLatest": dict(sorted(self._driver.lag.items()))}

    # -- planning and reading ----------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        plan = Plan.from_offset(end)
        if plan.batch == 0 or not plan.read or start == end:
            return []
        opts = self.options
        order = lineage_rank(self.driver.discovery.graph)
        shards = sorted(plan.read, key=lambda s: (order.get(s, 0), s))
        groups = [shards[i : i + opts.shards_per_task] for i in range(0, len(shards), opts.shards_per_task)]
        return [
            KinesisPartition(
                index=i,
                stream=opts.stream_name,
                endpoint=endpoint_of(opts),
                slices=tuple(
                    ShardSlice(sid, plan.shards[sid].start.to_dict(), plan.shards[sid].max_records) for sid in group
                ),
                max_records_per_fetch=opts.max_records_per_fetch,
                fetch_interval_ms=opts.fetch_interval_ms,
                max_fetch_duration_ms=opts.max_fetch_duration_ms,
                end_timestamp=plan.cut,
                progress={
                    "table": opts.lease_table_name,
                    "application": opts.application_name,
                    "run": plan.run,
                    "batch": str(plan.batch),
                },
            )
            for i, group in enumerate(groups)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KinesisPartition)
        return read_stream_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        plan = Plan.from_offset(end)
        self.driver.forget_before(plan)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


class _Driver:
    """Everything the driver keeps between calls: clients, graph, progress cache, probes, lag."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.kinesis = KinesisClient(options.aws_settings())
        self.discovery = ShardDiscovery(self.kinesis, options.stream_name)
        leases = open_lease_table(
            options.aws_settings(), options.lease_table_name, options.application_name, options.stream_name
        )
        self.claim = QueryClaim(leases)
        self.claim.acquire()
        self.progress = ProgressLog(ProgressStore.of(leases))
        self.lag: dict[str, int] = {}
        self._ends: dict[tuple[str, int], dict[str, BatchEnd]] = {}
        self._probes: dict[str, tuple[Position, str | None, float]] = {}
        self._listed_at = 0.0
        self._checked_trim = False

    def close(self) -> None:
        self._probes.clear()
        self.claim.release()

    # -- shards ------------------------------------------------------------------------

    def initial_frontier(self, start: Position) -> Frontier:
        initial = self.discovery.refresh(start)
        self._listed_at = time.monotonic()
        self._checked_trim = True
        empty = Frontier({}, {}, frozenset())
        return admit_ready(
            empty, self.discovery.graph, self.options.preserve_shard_order, {s: start for s in initial}, start
        )

    def frontier_after(self, plan: Plan) -> Frontier:
        ends = self.batch_ends(plan)
        frontier = advance(plan, ends)
        for sid, end in ends.items():
            if end.millis_behind_latest is not None:
                self.lag[sid] = end.millis_behind_latest
        ended = any(e.shard_end for e in ends.values())
        self._refresh(force=ended or len(self.discovery.graph) == 0)
        if not self._checked_trim:
            self._check_trimmed(frontier)
        return admit_ready(frontier, self.discovery.graph, self.options.preserve_shard_order)

    def _refresh(self, force: bool) -> None:
        if force or time.monotonic() - self._listed_at >= DISCOVERY_INTERVAL_S:
            self.discovery.refresh()
            self._listed_at = time.monotonic()

    def _check_trimmed(self, frontier: Frontier) -> None:
        """After a restart: a shard we still had to read that the listing no longer has lost data."""
        self._checked_trim = True
        missing = sorted(s for s in frontier.positions if s not in self.discovery.graph)
        if not missing:
            return
        detail = ", ".join(f"{s} (unread from {frontier.positions[s]})" for s in missing)
        message = (
            f"stream {self.options.stream_name!r}: shard(s) {detail} were trimmed past retention before "
            "they were read"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(message + "; set failOnDataLoss=false to skip them and continue")
        log.warning("%s; continuing because failOnDataLoss=false", message)

    # -- progress ------------------------------------------------------------------------

    def batch_ends(self, plan: Plan) -> dict[str, BatchEnd]:
        if plan.batch == 0 or not plan.read:
            return {}
        key = (plan.run, plan.batch)
        if key not in self._ends:
            self._ends[key] = self.progress.ends(plan.run, plan.batch)
        return self._ends[key]

    def forget_before(self, plan: Plan) -> None:
        for key in [k for k in self._ends if k[0] == plan.run and k[1] < plan.batch]:
            del self._ends[key]
        self.progress.purge_before(plan.run, plan.batch)

    # -- probes --------------------------------------------------------------------------

    def probe(self, shard_ids: Sequence[str], positions: Mapping[str, Position]) -> dict[str, bool]:
        """One GetRecords(Limit=1) per idle shard, at most once per idlePollIntervalMs each."""
        interval = self.options.idle_poll_interval_ms / 1000
        now = time.monotonic()
        found: dict[str, bool] = {}
        for sid in shard_ids:
            cached = self._probes.get(sid)
            if cached and cached[0] == positions[sid] and now - cached[2] < interval:
                continue
            found[sid] = self._probe_one(sid, positions[sid], cached, now)
        return found

    def _probe_one(self, sid: str, position: Position, cached, now: float) -> bool:
        stream = self.options.stream_name
        iterator = cached[1] if cached and cached[0] == position else None
        try:
            if iterator is None:
                iterator = self.kinesis.get_shard_iterator(stream, sid, position)
            page = self.kinesis.get_records(iterator, 1, sid, stream)
        except IteratorExpiredError:
            self._probes.pop(sid, None)
            return False
        if page.millis_behind_latest is not None:
            self.lag[sid] = page.millis_behind_latest
        has_data = len(page) > 0 or page.shard_ended
        self._probes[sid] = (position, None if has_data else page.next_iterator, now)
        return has_data
