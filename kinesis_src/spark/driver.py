"""The driver-side state of a streaming query: clients, lineage, progress cache, probes, lag.

One :class:`StreamDriver` lives in the long-lived Python process that runs
``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit`` for one
query run. It is created lazily by :class:`~.stream.KinesisStreamReader`
and never pickled (it holds sockets and a heartbeat thread).
"""

from __future__ import annotations

import logging
import time
from typing import Mapping, Sequence

from ..aws import KinesisClient
from ..discovery import ShardDiscovery
from ..errors import DataLossError, IteratorExpiredError
from ..leases.claim import QueryClaim
from ..leases.progress import ProgressStore
from ..positions import Position
from .offsets import Plan
from .options import SourceOptions
from .planner import BatchEnd, Frontier, admit_ready, advance
from .progress_log import ProgressLog, open_lease_table

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_S = 30.0


class StreamDriver:
    """Everything the driver keeps between calls: clients, graph, progress cache, probes, lag."""

    def __init__(
        self,
        options: SourceOptions,
        kinesis: KinesisClient | None = None,
        progress: ProgressLog | None = None,
        claim: QueryClaim | None = None,
    ) -> None:
        """``kinesis``, ``progress`` and ``claim`` replace the real clients in unit tests."""
        self.options = options
        self.kinesis = kinesis or KinesisClient(options.aws_settings())
        self.discovery = ShardDiscovery(self.kinesis, options.stream_name)
        if progress is None or claim is None:
            leases = open_lease_table(
                options.aws_settings(), options.lease_table_name, options.application_name, options.stream_name
            )
            claim = claim or QueryClaim(leases)
            progress = progress or ProgressLog(ProgressStore.of(leases))
        self.claim = claim
        self.claim.acquire()
        self.progress = progress
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
