"""The Spark source's view of per-batch progress: planner ``BatchEnd`` <-> lease-table items."""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from typing import Any, Mapping

from ..aws.dynamodb import DynamoDBClient
from ..config import AwsSettings
from ..leases.progress_store import ProgressStore, ShardProgress
from ..leases.table import LeaseTable
from .planner import BatchEnd


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

        The only clean-up (no TTL: a restart after any time needs the last committed batch's ends).
        """
        if batch >= 2:
            self.store.purge_batch(run, batch - 1, shard_ids)


_SAME_NAMED = tuple(sorted({f.name for f in fields(BatchEnd)} & {f.name for f in fields(ShardProgress)}))
"""The fields both views have under one name (stop reason, lag, cost counters): copied as they are either way,
so a figure added to both travels without a line here."""


def _same_named(view: BatchEnd | ShardProgress) -> dict[str, Any]:
    return {name: getattr(view, name) for name in _SAME_NAMED}


def to_batch_end(progress: ShardProgress) -> BatchEnd:
    """The planner's view of an item."""
    return BatchEnd(next_position=progress.end, record_count=progress.records, shard_end=progress.shard_ended,
                    **_same_named(progress))


def to_shard_progress(shard_id: str, end: BatchEnd) -> ShardProgress:
    return ShardProgress(shard_id=shard_id, end=end.next_position, shard_ended=end.shard_end,
                         records=end.record_count, **_same_named(end))


def open_lease_table(settings: AwsSettings, table: str, application: str, stream: str) -> LeaseTable:
    """Driver side: make sure the table exists (creating it on first use)."""
    leases = LeaseTable(DynamoDBClient(settings), table, application, stream)
    leases.ensure_table(create=True)
    return leases


def driver_progress_log(leases: LeaseTable) -> ProgressLog:
    """Driver side: the log over the query's lease table."""
    return ProgressLog(ProgressStore.of(leases))


@lru_cache(maxsize=8)
def task_progress_log(settings: AwsSettings, table: str, application: str, stream: str) -> ProgressLog:
    """Executor side: the driver created the table; tasks only write and read items."""
    return ProgressLog(ProgressStore(DynamoDBClient(settings), table, application, stream))
