"""Per-batch progress for the Spark source: where each shard of a micro-batch ended.

Spark's ``read()`` runs on executors and cannot report back to the driver,
yet the driver must know where each shard's read stopped to plan the next
micro-batch, and a re-run of an uncommitted batch must stop at exactly the
same positions (deterministic replay). So each task records, per shard, the
end position it reached and whether the shard hit SHARD_END; the first
writer wins (put-if-absent), and a re-run or speculative task reads back
what was recorded instead of writing its own.

Items live in the lease table (see :mod:`kinesis_src.leases.table`):

* pk ``progress#<application>#<stream>#<run id>#<batch id>``, sk ``shard#<shardId>``
* ``endPosition`` (S, the Position as canonical JSON), ``shardEnded`` (BOOL),
  ``childShardIds`` (L of S), ``records`` (N), ``recordedAt`` (N, epoch ms),
  ``stopReason`` (S: record_limit, time_limit, caught_up, end_timestamp,
  end_sequence, shard_end -- whether the shard has more to read now),
  ``millisBehindLatest`` (N, optional: lag when the read stopped),
  ``bytes``, ``throttles``, ``retries`` (N, optional: what the read cost, for
  the query progress; an item of an earlier version has none and reads as 0).

No ``ttl`` attribute, on purpose: the ends of a run's last committed batch
are the only record of where its next batch starts, and a query may be
stopped for any length of time before it resumes. Older batches are deleted
explicitly (:meth:`ProgressStore.purge_batch`, called when Spark commits the
next batch), so a run keeps the items of at most its last two batches.

Request cost of one micro-batch over N shards: N PutItem (one per shard,
from the tasks) or one TransactWriteItems per task (:meth:`record_many`,
up to 100 shards); one consistent Query for the driver's read-back
(~5 KB per 25 shards, one request per 1 MB); ceil(N/25) BatchWriteItem to
purge it after commit. For N = 100 with one shard per task: 100 + 1 + 4 =
105 requests; with tasks of 10 shards: 10 + 1 + 4 = 15.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..aws.dynamodb import DynamoDBClient, Item
from ..errors import ConfigurationError, InvalidPositionError
from ..names import validate_name, validate_table_name
from ..positions import Position
from .model import Lease
from .serializer import HASH_KEY, LEASE_PREFIX, RANGE_KEY, LeaseCodec
from .table import LeaseTable

SHARD_ID = "shardId"
END_POSITION = "endPosition"
SHARD_ENDED = "shardEnded"
CHILD_SHARD_IDS = "childShardIds"
RECORDS = "records"
RECORDED_AT = "recordedAt"
STOP_REASON = "stopReason"
MILLIS_BEHIND_LATEST = "millisBehindLatest"
BYTES = "bytes"
THROTTLES = "throttles"
RETRIES = "retries"

_TRANSACT_MAX = 100


@dataclass(frozen=True)
class ShardProgress:
    """Where one shard's read in one micro-batch stopped."""

    shard_id: str
    end: Position
    shard_ended: bool = False
    child_shard_ids: tuple[str, ...] = ()
    records: int = 0
    stop_reason: str = ""  # why the read stopped (kinesis_src.retrieval.cursor.StopReason value); tells the planner
    millis_behind_latest: int | None = None  # lag at the end of the read, for query progress
    byte_count: int = 0  # record data read, for query progress
    throttles: int = 0  # throttled calls the read retried
    retries: int = 0  # calls the read retried (throttles included)

    def same_outcome(self, other: ShardProgress) -> bool:
        """Equal end and end-of-shard: what deterministic replay needs (counts may differ)."""
        return (self.shard_id, self.end, self.shard_ended) == (other.shard_id, other.end, other.shard_ended)


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
        self.codec = LeaseCodec(self.table_name)

    @classmethod
    def of(cls, leases: LeaseTable) -> ProgressStore:
        """The store sharing a lease table (needed for fenced writes)."""
        return cls(leases.dynamodb, leases.table_name, leases.application, leases.stream, leases=leases)

    def partition(self, run_id: str, batch_id: int) -> str:
        validate_name(run_id, "run id")
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
            raise ConfigurationError(f"batch id must be an integer >= 0, got {batch_id!r}")
        return f"progress#{self.application}#{self.stream}#{run_id}#{batch_id}"

    # -- writes ---------------------------------------------------------------------

    def record(self, run_id: str, batch_id: int, progress: ShardProgress) -> RecordResult:
        """Put-if-absent (first writer wins), no lease needed: what a Spark task calls."""
        item = self._item(run_id, batch_id, progress)
        result = self.dynamodb.put_item(self.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
        if result.ok:
            return RecordResult(True, progress)
        return RecordResult(False, self._existing(run_id, batch_id, progress.shard_id, result.item))

    def record_many(self, run_id: str, batch_id: int, progresses: Sequence[ShardProgress]) -> dict[str, RecordResult]:
        """Several shards of one task in one TransactWriteItems per 100 (1 request instead of N).

        A transaction is all-or-nothing, so when some shards were already
        recorded (a re-run), those are read from the cancellation reasons and
        the rest are written in the next round.
        """
        results: dict[str, RecordResult] = {}
        for start in range(0, len(progresses), _TRANSACT_MAX):
            pending = list(progresses[start : start + _TRANSACT_MAX])
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
        """Put-if-absent only while ``lease`` is still held as read (owner and counter).

        One TransactWriteItems: [ConditionCheck on the lease, Put progress].
        A worker that lost the lease gets LeaseLostError and nothing is
        written, neither the progress item nor the lease.
        """
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
            keys = [{HASH_KEY: i[HASH_KEY], RANGE_KEY: i[RANGE_KEY]} for i in items]
        else:
            keys = [self._key(run_id, batch_id, s) for s in shard_ids]
        return self.dynamodb.batch_delete(self.table_name, keys)

    # -- items ----------------------------------------------------------------------

    def _key(self, run_id: str, batch_id: int, shard_id: str) -> Item:
        return {HASH_KEY: {"S": self.partition(run_id, batch_id)}, RANGE_KEY: {"S": LEASE_PREFIX + shard_id}}

    def _item(self, run_id: str, batch_id: int, progress: ShardProgress) -> Item:
        item: Item = {
            **self._key(run_id, batch_id, progress.shard_id),
            SHARD_ID: {"S": progress.shard_id},
            END_POSITION: {"S": json.dumps(progress.end.to_dict(), separators=(",", ":"))},
            SHARD_ENDED: {"BOOL": progress.shard_ended},
            CHILD_SHARD_IDS: {"L": [{"S": c} for c in progress.child_shard_ids]},
            RECORDS: {"N": str(progress.records)},
            RECORDED_AT: {"N": str(self.now_ms())},
            STOP_REASON: {"S": progress.stop_reason},
        }
        if progress.millis_behind_latest is not None:
            item[MILLIS_BEHIND_LATEST] = {"N": str(progress.millis_behind_latest)}
        item.update({BYTES: {"N": str(progress.byte_count)}, THROTTLES: {"N": str(progress.throttles)},
                     RETRIES: {"N": str(progress.retries)}})
        return item

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
        codec = self.codec
        text = codec.string(item, END_POSITION)
        try:
            end = Position.from_dict(json.loads(text))
        except (ValueError, TypeError, AttributeError, InvalidPositionError) as exc:
            raise codec.corrupt(item, END_POSITION, "a position as JSON", f"is {text!r} ({exc})") from None
        records = codec.number(item, RECORDS)
        return ShardProgress(
            shard_id=codec.string(item, SHARD_ID),
            end=end,
            shard_ended=codec.boolean(item, SHARD_ENDED),
            child_shard_ids=codec.strings(item, CHILD_SHARD_IDS),
            records=records,
            stop_reason=codec.string(item, STOP_REASON, optional=True),
            millis_behind_latest=codec.number(item, MILLIS_BEHIND_LATEST) if MILLIS_BEHIND_LATEST in item else None,
            byte_count=self._count(item, BYTES),
            throttles=self._count(item, THROTTLES),
            retries=self._count(item, RETRIES),
        )

    def _count(self, item: Item, name: str) -> int:
        """A read-cost count; 0 in an item of an earlier version, which has none."""
        return self.codec.number(item, name) if name in item else 0
