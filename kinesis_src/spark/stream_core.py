"""``spark.readStream.format("kinesis")``: the stream reader's work, on every PySpark 4.x.

Each stream is planned apart by its own :class:`~.driver.StreamDriver` (driver side, never pickled).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..identity import check_same_stream
from ..positions import Position, PositionKind
from .batch import endpoint_of
from .driver import StreamDriver
from .offsets import Plan, ShardPlan, join_offsets, split_offset
from .options import SourceOptions
from .partitions import KinesisPartition, ShardSlice
from .planner import compact_drained, for_trigger, idle_shards, next_plan
from .shutdown import stop_on_sigterm
from .tasks import read_stream_partition

log = logging.getLogger(__name__)


class StreamReaderCore(DataSourceStreamReader):
    """Offsets, planning, partitions and commits of ``format("kinesis")``; subclasses add Spark's entry points."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict[str, Any] | None = None
        self._cut: str | None = None  # AvailableNow's arrival-time cut (set by .stream on PySpark 4.2+)
        self._drivers: dict[str, StreamDriver] = {}  # stream name -> its driver, created on first use
        self._added: dict[str, dict[str, Any]] = {}  # streams new to the checkpoint: their first offset, kept stable
        self._dropped: set[str] = set()  # streams of the checkpoint no longer named (logged once each)
        self._committed: dict[str, dict[str, Any]] = {}  # each stream's last committed offset

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_drivers"] = {}  # clients and sockets stay on the driver
        return state

    @property
    def _driver(self) -> StreamDriver | None:
        """The first stream's driver, if created (one-stream tests and benchmarks set it)."""
        return self._drivers.get(self.options.stream_name)

    @_driver.setter
    def _driver(self, driver: StreamDriver | None) -> None:
        if driver is None:
            self._drivers.clear()
        else:
            self._drivers[driver.name] = driver

    @property
    def driver(self) -> StreamDriver:
        """The first stream's driver (the only one of a one-stream query)."""
        return self.driver_for(self.options.stream_name)

    def driver_for(self, name: str) -> StreamDriver:
        if name not in self._drivers:
            ref = next(r for r in self.options.streams if r.name == name)
            shared = next(iter(self._drivers.values()), None)  # one Kinesis client for every stream
            self._drivers[name] = StreamDriver(self.options, kinesis=shared.kinesis if shared else None, stream=ref)
            stop_on_sigterm()  # so Spark's stop reaches stop(): see .shutdown
        return self._drivers[name]

    # -- offsets -------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """The plan before the first batch: every ready shard at the initial position, none read yet.

        Cached (Spark calls it twice); ``latest`` becomes the start time, so replays start the same.
        """
        if self._initial is None:
            start, run = self._start_position(), uuid.uuid4().hex
            self._initial = join_offsets({ref.name: self._first_offset(ref.name, start, run) for ref in self.options.streams})
        return self._initial

    def _start_position(self) -> Position:
        start = self.options.initial_position
        return Position.at_timestamp(datetime.now(UTC)) if start.kind is PositionKind.LATEST else start

    def _first_offset(self, name: str, start: Position, run: str) -> dict[str, Any]:
        """A stream's batch-0 plan: its ready shards at ``start``."""
        driver = self.driver_for(name)
        frontier = driver.initial_frontier(start)
        plan = Plan(
            run=run,
            batch=0,
            shards={sid: ShardPlan(pos, 0) for sid, pos in frontier.positions.items()},
            drained=frontier.drained,
            stream=driver.identity,
        )
        log.info("kinesis stream %r: new run %s over %d shard(s)", name, plan.run, len(plan.shards))
        return driver.plans.offset_of(plan)

    def _per_stream(self, offset: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The offset's streams that the options still name; the others are dropped (logged once each)."""
        names = self.options.stream_names
        per = split_offset(offset, names)
        for name in sorted(set(per) - set(names) - self._dropped):
            self._dropped.add(name)
            log.warning(
                "kinesis stream %r is in this query's checkpoint but no longer in option streamName/streamARN: "
                "dropped from the query (its positions are forgotten; adding it back later starts it at "
                "initialPosition)", name,
            )
        return {name: value for name, value in per.items() if name in names}

    def _added_offset(self, name: str) -> dict[str, Any]:
        """A stream the checkpoint does not have: its first plan, made once, at ``initialPosition``."""
        if name not in self._added:
            log.info("kinesis stream %r is new to this query's checkpoint: it starts at initialPosition", name)
            self._added[name] = self._first_offset(name, self._start_position(), uuid.uuid4().hex)
        return self._added[name]

    def next_offset(self, start: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        """The offset after ``start``: every stream's next plan, at most ``max_rows`` records in all.

        ``start`` itself when no stream has anything to read, so Spark runs no empty batch.
        """
        per = self._per_stream(start)
        rows = self._row_limits(max_rows)
        out = {
            ref.name: self._latest_of(ref.name, per.get(ref.name) or self._added_offset(ref.name), rows[ref.name])
            for ref in self.options.streams
        }
        joined = join_offsets(out)
        return start if joined == start else joined

    def _row_limits(self, max_rows: int | None) -> dict[str, int | None]:
        """maxRecordsPerTrigger split evenly between the streams (at least one record each)."""
        names = self.options.stream_names
        if max_rows is None:
            return dict.fromkeys(names)
        base, extra = divmod(max_rows, len(names))
        return {name: max(1, base + (i < extra)) for i, name in enumerate(names)}

    def _latest_of(self, name: str, offset: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        """One stream's next offset: its next plan, or ``offset`` itself when it has nothing to read."""
        driver = self.driver_for(name)
        plan = self._same_stream(driver, driver.plans.plan_of(offset))  # before any position reaches Kinesis
        bounded = self._cut is None  # AvailableNow checks every position before it plans: it must not end early
        frontier = for_trigger(plan, driver.frontier_after(plan, budgeted=bounded), self._cut)  # before probing
        idle = [sid for sid in idle_shards(frontier) if sid not in driver.held]
        has_data = driver.probe(idle, frontier.positions) if self._cut is None else {}
        opts = self.options
        nxt = next_plan(plan, frontier, has_data, opts.max_records_per_shard, max_rows, self._cut, driver.held)
        if nxt is None:
            return offset
        nxt = compact_drained(nxt, driver.discovery.graph)  # the lineage implies the rest
        driver.planned(nxt)
        log.info("kinesis stream %r: batch %d reads %d shard(s)", name, nxt.batch, len(nxt.read))
        return driver.plans.offset_of(nxt)

    def _same_stream(self, driver: StreamDriver, plan: Plan) -> Plan:
        """Refuse a checkpoint made for another stream; an offset without an identity adopts the current one."""
        current = driver.identity
        if current is None:
            return plan  # the endpoint does not report a creation time: nothing to compare
        if plan.stream is None:
            return replace(plan, stream=current)
        opts = self.options
        check_same_stream(
            plan.stream,
            current,
            f"this query's checkpoint (kinesis-src run {plan.run})",
            "Start the query with a new checkpointLocation (initialPosition then applies again), or remove the "
            f"stream from the query's stream list and add it back. The lease-table items the old run left in "
            f"{opts.lease_table_name!r} under applicationName {opts.application_name!r} can be deleted "
            "(docs/leases.md, 'Inspecting a table').",
        )
        return plan

    # -- planning and reading ----------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Each stream whose plan moved between ``start`` and ``end`` reads its plan of ``end``."""
        if start == end:
            return []
        before = split_offset(start, self.options.stream_names)
        after = split_offset(end, self.options.stream_names)
        out: list[InputPartition] = []
        for name in sorted(after):
            if before.get(name) == after[name]:
                continue
            if name not in self.options.stream_names:
                log.warning(
                    "kinesis stream %r: a replayed batch reads it, but it is no longer in option "
                    "streamName/streamARN: its records of this batch are not read", name,
                )
                continue
            driver = self.driver_for(name)
            plan = self._same_stream(driver, driver.plans.plan_of(after[name]))  # a replay reads old positions
            if plan.batch == 0 or not plan.read:
                continue
            driver.check_replay(plan)  # a batch planned before a restart: its starts may have expired since
            out.extend(self._stream_partitions(driver, plan, first_index=len(out)))
        return out

    def _stream_partitions(self, driver: StreamDriver, plan: Plan, first_index: int) -> list[KinesisPartition]:
        opts = self.options
        order = driver.ranks.of(driver.discovery.graph)  # recomputed only when shards were added
        shards = sorted(plan.read, key=lambda s: (order.get(s, 0), s))
        groups = [shards[i : i + opts.shards_per_task] for i in range(0, len(shards), opts.shards_per_task)]
        return [
            KinesisPartition(
                index=first_index + i,
                stream=driver.name,
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
                fan_out=driver.fan_out,
                key_range=opts.key_range,
                stream_ref=driver.stream if driver.stream.arn else None,
            )
            for i, group in enumerate(groups)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KinesisPartition)
        return read_stream_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        for name, offset in self._per_stream(end).items():
            if self._committed.get(name) != offset:  # a stream that did not move has nothing new to forget
                self.driver_for(name).forget_before(offset)
                self._committed[name] = offset

    def stop(self) -> None:
        """Close every stream's driver (claims released), even when closing one of them fails."""
        drivers, self._drivers = list(self._drivers.values()), {}
        failure: BaseException | None = None
        for driver in drivers:
            try:
                driver.close()
            except Exception as exc:  # noqa: BLE001  (the others still release their claims; re-raised below)
                failure = failure or exc
        if failure is not None:
            raise failure
