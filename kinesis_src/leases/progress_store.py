"""Per-batch progress for the Spark source: where each shard of a micro-batch ended.

Tasks cannot report to the driver, and a re-run must stop where the first run did, so each records
its shards' ends, first writer wins. No ``ttl``, on purpose: docs/leases.md, "Spark progress"."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..aws.dynamodb import DynamoDBClient, Item
from ..aws.dynamodb_results import TRANSACT_MAX
from ..errors import ConfigurationError
from ..names import validate_name, validate_table_name
from .model import Lease
from .schema.batch_items import ShardProgress, progress_item, progress_of
from .schema.keys import HASH_KEY, RANGE_KEY, keys_of, lease_key, progress_partition
from .schema.values import ItemReader
from .table import LeaseTable

__all__ = ["ProgressStore", "RecordResult", "ShardProgress"]


@dataclass(frozen=True)
class RecordResult:
    """``recorded``: this call wrote it. Otherwise ``progress`` is what the first writer recorded."""

    recorded: bool
    progress: ShardProgress


@dataclass
class ProgressStore:
    """Progress items of one application's stream, in the lease table."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    leases: LeaseTable | None = None
    now_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000), repr=False)

    def __post_init__(self) -> None:
        validate_table_name(self.table_name)
        validate_name(self.application, "applicationName")
        validate_name(self.stream, "streamName")
        self.codec = ItemReader(self.table_name)

    @classmethod
    def of(cls, leases: LeaseTable) -> ProgressStore:
        """The store sharing a lease table (needed for fenced writes)."""
        return cls(leases.dynamodb, leases.table_name, leases.application, leases.stream, leases=leases)

    def partition(self, run_id: str, batch_id: int) -> str:
        validate_name(run_id, "run id")
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
            raise ConfigurationError(f"batch id must be an integer >= 0, got {batch_id!r}")
        return progress_partition(self.application, self.stream, run_id, batch_id)

    # -- writes ---------------------------------------------------------------------

    def record(self, run_id: str, batch_id: int, progress: ShardProgress) -> RecordResult:
        """Put-if-absent (first writer wins), no lease needed: what a Spark task calls."""
        item = self._item(run_id, batch_id, progress)
        result = self.dynamodb.put_item(self.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
        if result.ok:
            return RecordResult(True, progress)
        return RecordResult(False, self._existing(run_id, batch_id, progress.shard_id, result.item))

    def record_many(self, run_id: str, batch_id: int, progresses: Sequence[ShardProgress]) -> dict[str, RecordResult]:
        """Several shards of one task in one TransactWriteItems per 100. A transaction is
        all-or-nothing, so shards already recorded (a re-run) are read from the cancellation reasons
        and the rest are written in the next round."""
        results: dict[str, RecordResult] = {}
        for start in range(0, len(progresses), TRANSACT_MAX):
            pending = list(progresses[start : start + TRANSACT_MAX])
            while pending:
                pending = self._record_round(run_id, batch_id, pending, results)
        return results

    def _record_round(
        self, run_id: str, batch_id: int, pending: list[ShardProgress], results: dict[str, RecordResult]
    ) -> list[ShardProgress]:
        actions = [self._put_if_absent(run_id, batch_id, p) for p in pending]
        outcome = self.dynamodb.transact_write(self.table_name, actions)
        if outcome.committed:
            results.update((p.shard_id, RecordResult(True, p)) for p in pending)
            return []
        retry = []
        for progress, code, old in zip(pending, outcome.reasons, outcome.items):
            if code == "ConditionalCheckFailed":
                results[progress.shard_id] = RecordResult(False, self._existing(run_id, batch_id, progress.shard_id, old))
            else:
                retry.append(progress)
        return retry

    def record_fenced(self, lease: Lease, run_id: str, batch_id: int, progress: ShardProgress) -> RecordResult:
        """Put-if-absent only while ``lease`` is still held as read (owner and counter): one
        TransactWriteItems [ConditionCheck, Put]. A worker that lost the lease gets LeaseLostError,
        and nothing is written."""
        if self.leases is None:
            raise ConfigurationError("record_fenced needs a ProgressStore made with ProgressStore.of(lease_table)")
        actions = [self.leases.fence(lease), self._put_if_absent(run_id, batch_id, progress)]
        outcome = self.dynamodb.transact_write(self.table_name, actions)
        if outcome.committed:
            return RecordResult(True, progress)
        if outcome.reasons[0] != "None":
            raise self.leases.lost_error(lease, outcome.items[0], f"progress write for batch {batch_id} of run {run_id}")
        return RecordResult(False, self._existing(run_id, batch_id, progress.shard_id, outcome.items[1]))

    # -- reads and clean-up -------------------------------------------------------------

    def read_batch(self, run_id: str, batch_id: int) -> dict[str, ShardProgress]:
        """Every shard recorded for a batch: one consistent Query (paged per 1 MB)."""
        items = self.dynamodb.query(self.table_name, HASH_KEY, self.partition(run_id, batch_id))
        return {p.shard_id: p for p in map(self._progress, items)}

    def get(self, run_id: str, batch_id: int, shard_id: str) -> ShardProgress | None:
        item = self.dynamodb.get_item(self.table_name, self._key(run_id, batch_id, shard_id))
        return None if item is None else self._progress(item)

    def purge_batch(self, run_id: str, batch_id: int, shard_ids: Iterable[str] | None = None) -> int:
        """Delete a committed batch's items: ceil(N/25) BatchWriteItem (+1 Query if ids not given)."""
        if shard_ids is None:
            items = self.dynamodb.query(
                self.table_name, HASH_KEY, self.partition(run_id, batch_id), projection=(HASH_KEY, RANGE_KEY)
            )
            keys = keys_of(items)
        else:
            keys = [self._key(run_id, batch_id, s) for s in shard_ids]
        return self.dynamodb.batch_delete(self.table_name, keys)

    # -- items ----------------------------------------------------------------------

    def _key(self, run_id: str, batch_id: int, shard_id: str) -> Item:
        return lease_key(self.partition(run_id, batch_id), shard_id)

    def _item(self, run_id: str, batch_id: int, progress: ShardProgress) -> Item:
        return progress_item(self._key(run_id, batch_id, progress.shard_id), progress, self.now_ms())

    def _put_if_absent(self, run_id: str, batch_id: int, progress: ShardProgress) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": self._item(run_id, batch_id, progress),
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": HASH_KEY},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _existing(self, run_id: str, batch_id: int, shard_id: str, item: Item | None) -> ShardProgress:
        if item is None:  # an endpoint that does not return ALL_OLD on failure
            item = self.dynamodb.get_item(self.table_name, self._key(run_id, batch_id, shard_id))
        if item is None:
            raise self.codec.corrupt(
                self._key(run_id, batch_id, shard_id), HASH_KEY, "the recorded progress item", "vanished"
            )
        return self._progress(item)

    def _progress(self, item: Item) -> ShardProgress:
        return progress_of(self.codec, item)
