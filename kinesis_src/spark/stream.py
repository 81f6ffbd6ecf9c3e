"""``spark.readStream.format("kinesis")``: the micro-batch stream reader.

Driver side (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``)
runs in one long-lived Python process per query run, so clients, the
lineage graph and probe iterators are cached on a lazily created
:class:`~.driver.StreamDriver` that is never pickled. Executors get a fresh copy of this
reader without it and build their own clients in ``read()``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..identity import check_same_stream
from ..positions import Position, PositionKind, format_timestamp
from .batch import endpoint_of
from .driver import StreamDriver
from .offsets import Plan, ShardPlan
from .options import SourceOptions
from .partitions import KinesisPartition, ShardSlice
from .planner import compact_drained, for_trigger, idle_shards, next_plan
from .shutdown import stop_on_sigterm
from .tasks import read_stream_partition

log = logging.getLogger(__name__)


class KinesisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict[str, Any] | None = None
        self._cut: str | None = None
        self._driver: StreamDriver | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_driver"] = None  # clients and sockets stay on the driver
        return state

    @property
    def driver(self) -> StreamDriver:
        if self._driver is None:
            self._driver = StreamDriver(self.options)
            stop_on_sigterm()  # so Spark's stop reaches stop(): see .shutdown
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
                start = Position.at_timestamp(datetime.now(UTC))
            frontier = self.driver.initial_frontier(start)
            plan = Plan(
                run=uuid.uuid4().hex,
                batch=0,
                shards={sid: ShardPlan(pos, 0) for sid, pos in frontier.positions.items()},
                drained=frontier.drained,
                stream=self.driver.identity,
            )
            self._initial = self.driver.plans.offset_of(plan)
            log.info("kinesis stream %r: new run %s over %d shard(s)", self.options.stream_name, plan.run, len(plan.shards))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cut = format_timestamp(datetime.now(UTC))
        log.info("AvailableNow: reading records that arrived up to %s", self._cut)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        plan = self._same_stream(self.driver.plans.plan_of(start))  # before any position reaches Kinesis
        driver = self.driver
        bounded = self._cut is None  # AvailableNow checks every position before it plans: it must not end early
        frontier = for_trigger(plan, driver.frontier_after(plan, budgeted=bounded), self._cut)  # before probing
        idle = [sid for sid in idle_shards(frontier) if sid not in driver.held]
        has_data = driver.probe(idle, frontier.positions) if self._cut is None else {}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        opts = self.options
        nxt = next_plan(plan, frontier, has_data, opts.max_records_per_shard, max_rows, self._cut, driver.held)
        if nxt is None:
            return start
        nxt = compact_drained(nxt, driver.discovery.graph)  # the lineage implies the rest
        log.info("kinesis stream %r: batch %d reads %d shard(s)", self.options.stream_name, nxt.batch, len(nxt.read))
        return driver.plans.offset_of(nxt)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if self._driver is None:
            return None
        return {"millisBehindLatest": dict(sorted(self._driver.lag.items())), "dataLoss": self._driver.data_loss()}

    def _same_stream(self, plan: Plan) -> Plan:
        """Refuse a checkpoint made for another stream; an offset without an identity adopts the current one."""
        current = self.driver.identity
        if current is None:
            return plan  # the endpoint does not report a creation time: nothing to compare
        if plan.stream is None:
            return replace(plan, stream=current)
        opts = self.options
        check_same_stream(
            plan.stream,
            current,
            f"this query's checkpoint (kinesis-src run {plan.run})",
            "Start the query with a new checkpointLocation (initialPosition then applies again). The "
            f"lease-table items the old run left in {opts.lease_table_name!r} under applicationName "
            f"{opts.application_name!r} can be deleted (docs/leases.md, 'Inspecting a table').",
        )
        return plan

    # -- planning and reading ----------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        plan = self._same_stream(self.driver.plans.plan_of(end))  # a replayed batch after a restart reads old positions
        if plan.batch == 0 or not plan.read or start == end:
            return []
        opts = self.options
        order = self.driver.ranks.of(self.driver.discovery.graph)  # recomputed only when shards were added
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
                fail_on_data_loss=opts.fail_on_data_loss,
                strict_aggregation=opts.strict_aggregation,
                fan_out=self.driver.fan_out,
            )
            for i, group in enumerate(groups)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KinesisPartition)
        return read_stream_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        self.driver.forget_before(end)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None
