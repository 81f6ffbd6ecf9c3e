"""The Spark source's view of per-batch progress: planner ``BatchEnd`` <-> lease-table items.

The store itself (item layout, first-writer-wins writes, one-Query reads) is
:mod:`kinesis_src.leases.progress`; this module translates, and caches one
store per endpoint and table in each process (Python workers are reused
across tasks).

The Spark source's items carry three more numbers than the store's
:class:`ShardProgress`: what the task's read cost (``bytes``, ``throttles``,
``retries``, all N; :mod:`.task_figures`), for the query progress only.
:class:`SparkProgressStore` writes and reads them; an item without them (an
earlier version's) reads as zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Mapping

from ..aws.dynamodb import DynamoDBClient, Item
from ..config import AwsSettings
from ..leases.progress import ProgressStore, ShardProgress
from ..leases.table import LeaseTable
from .planner import BatchEnd

BYTES = "bytes"
THROTTLES = "throttles"
RETRIES = "retries"


@dataclass(frozen=True)
class SparkShardProgress(ShardProgress):
    """A progress item with the read's cost: record data bytes, throttles and retries."""

    byte_count: int = 0
    throttles: int = 0
    retries: int = 0


class SparkProgressStore(ProgressStore):
    """The progress store with the read-cost attributes added to each item (see the module docstring)."""

    def _item(self, run_id: str, batch_id: int, progress: ShardProgress) -> Item:
        item = super()._item(run_id, batch_id, progress)
        if isinstance(progress, SparkShardProgress):
            item.update({BYTES: {"N": str(progress.byte_count)}, THROTTLES: {"N": str(progress.throttles)},
                         RETRIES: {"N": str(progress.retries)}})
        return item

    def _progress(self, item: Item) -> SparkShardProgress:
        base = super()._progress(item)

        def number(name: str) -> int:
            return self.codec.number(item, name) if name in item else 0

        own = {f.name: getattr(base, f.name) for f in fields(ShardProgress)}
        return SparkShardProgress(**own, byte_count=number(BYTES), throttles=number(THROTTLES), retries=number(RETRIES))


class ProgressLog:
    def __init__(self, store: ProgressStore) -> None:
        self.store = store

    def ends(self, run: str, batch: int) -> dict[str, BatchEnd]:
        return {sid: to_batch_end(p) for sid, p in self.store.read_batch(run, batch).items()}

    def record_many(self, run: str, batch: int, ends: Mapping[str, BatchEnd]) -> dict[str, BatchEnd]:
        """First writer wins per shard; returns what is recorded now (ours, or the earlier writer's)."""
        progresses = [to_shard_progress(sid, end) for sid, end in ends.items()]
        results = self.store.record_many(run, batch, progresses)
        return {sid: to_batch_end(result.progress) for sid, result in results.items()}

    def purge_before(self, run: str, batch: int, shard_ids: list[str] | None = None) -> None:
        """Delete the batch before ``batch``: nothing plans from it again once ``batch`` is committed.

        This is the only clean-up (progress items have no TTL: a restart after any time away
        needs the last committed batch's ends), so a run keeps at most its last two batches.
        """
        if batch >= 2:
            self.store.purge_batch(run, batch - 1, shard_ids)


def to_batch_end(progress: ShardProgress) -> BatchEnd:
    """The planner's view of an item; a plain ShardProgress (no read cost recorded) costs zeros."""
    cost = progress if isinstance(progress, SparkShardProgress) else SparkShardProgress(progress.shard_id, progress.end)
    return BatchEnd(
        next_position=progress.end,
        record_count=progress.records,
        shard_end=progress.shard_ended,
        stop_reason=progress.stop_reason,
        millis_behind_latest=progress.millis_behind_latest,
        byte_count=cost.byte_count,
        throttles=cost.throttles,
        retries=cost.retries,
    )


def to_shard_progress(shard_id: str, end: BatchEnd) -> SparkShardProgress:
    return SparkShardProgress(
        shard_id=shard_id,
        end=end.next_position,
        shard_ended=end.shard_end,
        records=end.record_count,
        stop_reason=end.stop_reason,
        millis_behind_latest=end.millis_behind_latest,
        byte_count=end.byte_count,
        throttles=end.throttles,
        retries=end.retries,
    )


def open_lease_table(settings: AwsSettings, table: str, application: str, stream: str) -> LeaseTable:
    """Driver side: make sure the table exists (creating it on first use)."""
    leases = LeaseTable(DynamoDBClient(settings), table, application, stream)
    leases.ensure_table(create=True)
    return leases


def driver_progress_log(leases: LeaseTable) -> ProgressLog:
    """Driver side: the log over the query's lease table, reading the tasks' read-cost attributes too."""
    return ProgressLog(SparkProgressStore.of(leases))


@lru_cache(maxsize=8)
def task_progress_log(settings: AwsSettings, table: str, application: str, stream: str) -> ProgressLog:
    """Executor side: the driver created the table; tasks only write and read items."""
    return ProgressLog(SparkProgressStore(DynamoDBClient(settings), table, application, stream))
