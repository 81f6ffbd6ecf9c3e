"""Lease, heartbeat, query-claim, stream-identity and layout items: attribute names and the codec.

Keys are built in :mod:`.keys`. Heartbeat and claim items carry ``ttl`` (garbage collection of
items whose writer died; never used for expiry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lineage import HashRange

from ...errors import InvalidPositionError, KinesisSourceError
from ...identity import StreamIdentity
from ...positions import format_timestamp
from ..model import _SENTINELS, Checkpoint, CheckpointKind, Lease, Throughput, WorkerHeartbeat
from .keys import CLAIM_RANGE_KEY, HASH_KEY, LEASE_PREFIX, RANGE_KEY, TTL_ATTRIBUTE, WORKER_PREFIX
from .values import ItemReader, number_value, string_value, strings_value

if TYPE_CHECKING:
    from ...aws.dynamodb import Item

SHARD_ID = "shardId"
LEASE_OWNER = "leaseOwner"
LEASE_COUNTER = "leaseCounter"
CHECKPOINT = "checkpoint"
CHECKPOINT_SUB_SEQUENCE = "checkpointSubSequenceNumber"
CHECKPOINT_TIMESTAMP = "checkpointTimestamp"
PARENT_SHARD_IDS = "parentShardIds"
CHILD_SHARD_IDS = "childShardIds"
STARTING_HASH_KEY = "startingHashKey"
ENDING_HASH_KEY = "endingHashKey"
OWNER_SWITCHES = "ownerSwitchesSinceCheckpoint"
LAST_UPDATED = "lastUpdated"
WORKER_ID = "workerId"
SESSION = "session"
HEARTBEAT = "heartbeat"
THROUGHPUT_RECORDS = "throughputRecords"  # records/s, written with a checkpoint (optional)
THROUGHPUT_BYTES = "throughputBytes"  # bytes/s
THROUGHPUT_AT = "throughputAt"  # epoch ms of the estimate
LEASE_CHANGES = "leaseChanges"  # heartbeats that announced an ownership change (optional)
LEASE_NOTIFY = "leaseNotify"  # workers the latest announcement concerns (optional)
STEAL_REQUEST = "stealRequestedBy"  # who asked the holder to release (optional; removed when the lease changes hands)
STREAM_ARN = "streamArn"
STREAM_CREATED = "streamCreated"
LEASE_PARTITIONS = "leasePartitions"  # the layout item's partition count

HEARTBEAT_TTL_S = 24 * 3600  # garbage collection of dead workers' items only; never used for expiry


def identity_item(key: Item, identity: StreamIdentity) -> Item:
    data = identity.to_dict()
    return {**key, STREAM_ARN: string_value(data["arn"]), STREAM_CREATED: string_value(data["created"])}


def layout_item(key: Item, partitions: int) -> Item:
    return {**key, LEASE_PARTITIONS: number_value(partitions)}


def throughput_values(throughput: Throughput, *names: str) -> dict[str, dict[str, str]]:
    """The three throughput attributes (or expression placeholders, in that order) of an estimate."""
    records, nbytes, at = names
    return {
        records: {"N": f"{throughput.records_per_s:.3f}"},
        nbytes: {"N": f"{throughput.bytes_per_s:.1f}"},
        at: number_value(throughput.measured_ms),
    }


@dataclass(frozen=True)
class LeaseCodec(ItemReader):
    """Lease, heartbeat, claim and identity items <-> values for one table."""

    # -- writing --------------------------------------------------------------------

    def lease_item(self, partition: str, lease: Lease) -> Item:
        item: Item = {
            HASH_KEY: string_value(partition),
            RANGE_KEY: string_value(LEASE_PREFIX + lease.shard_id),
            SHARD_ID: string_value(lease.shard_id),
            LEASE_COUNTER: number_value(lease.counter),
            CHECKPOINT: string_value(self.checkpoint_text(lease.checkpoint)),
            CHECKPOINT_SUB_SEQUENCE: number_value(lease.checkpoint.sub_sequence_number),
            PARENT_SHARD_IDS: strings_value(lease.parent_shard_ids),
            CHILD_SHARD_IDS: strings_value(lease.child_shard_ids),
            STARTING_HASH_KEY: string_value(str(lease.hash_range.start)),
            ENDING_HASH_KEY: string_value(str(lease.hash_range.end)),
            OWNER_SWITCHES: number_value(lease.owner_switches_since_checkpoint),
            LAST_UPDATED: number_value(lease.last_updated_ms),
        }
        if lease.owner is not None:
            item[LEASE_OWNER] = string_value(lease.owner)
        if lease.checkpoint.timestamp is not None:
            item[CHECKPOINT_TIMESTAMP] = string_value(format_timestamp(lease.checkpoint.timestamp))
        if lease.throughput is not None:
            item.update(throughput_values(lease.throughput, THROUGHPUT_RECORDS, THROUGHPUT_BYTES, THROUGHPUT_AT))
        return item  # never a steal request: only LeaseTable.request_steal writes one, on a held lease

    @staticmethod
    def checkpoint_text(checkpoint: Checkpoint) -> str:
        return checkpoint.sequence_number or checkpoint.kind.value

    def heartbeat_item(self, key: Item, worker: WorkerHeartbeat, ttl_s: int) -> Item:
        """A worker heartbeat or the query claim, under ``key`` (:func:`.keys.worker_key`, :func:`.keys.claim_key`)."""
        return {
            **key,
            WORKER_ID: string_value(worker.worker_id),
            SESSION: string_value(worker.session),
            HEARTBEAT: number_value(worker.heartbeat),
            LAST_UPDATED: number_value(worker.last_updated_ms),
            TTL_ATTRIBUTE: number_value(ttl_s),
        }

    # -- reading --------------------------------------------------------------------

    def lease(self, item: Item) -> Lease:
        shard_id = self.string(item, SHARD_ID)
        if self.key_part(item, RANGE_KEY) != LEASE_PREFIX + shard_id:
            raise self.corrupt(item, SHARD_ID, "the shard id in the sort key", f"is {shard_id!r}")
        owner = self.string(item, LEASE_OWNER, optional=True)
        if LEASE_OWNER in item and not owner:
            raise self.corrupt(item, LEASE_OWNER, "a worker id, or no attribute when unowned", "is empty")
        thief = self.string(item, STEAL_REQUEST, optional=True)
        if STEAL_REQUEST in item and not thief:
            raise self.corrupt(item, STEAL_REQUEST, "a worker id, or no attribute when nobody asked", "is empty")
        return Lease(
            shard_id=shard_id,
            checkpoint=self._checkpoint(item),
            hash_range=self._hash_range(item),
            counter=self.number(item, LEASE_COUNTER),
            owner=owner or None,
            parent_shard_ids=self.strings(item, PARENT_SHARD_IDS),
            child_shard_ids=self.strings(item, CHILD_SHARD_IDS),
            owner_switches_since_checkpoint=self.number(item, OWNER_SWITCHES),
            last_updated_ms=self.number(item, LAST_UPDATED),
            throughput=self._throughput(item),
            steal_requested_by=thief or None,
        )

    def _throughput(self, item: Item) -> Throughput | None:
        """Optional: a lease never checkpointed with an estimate has none."""
        if THROUGHPUT_AT not in item:
            return None
        return Throughput(self.decimal(item, THROUGHPUT_RECORDS), self.decimal(item, THROUGHPUT_BYTES),
                          self.number(item, THROUGHPUT_AT))

    def worker(self, item: Item) -> WorkerHeartbeat:
        worker_id = self.string(item, WORKER_ID)
        if self.key_part(item, RANGE_KEY) != WORKER_PREFIX + worker_id:
            raise self.corrupt(item, WORKER_ID, "the worker id in the sort key", f"is {worker_id!r}")
        return self._heartbeat(item, worker_id)

    def claim(self, item: Item) -> WorkerHeartbeat:
        if self.key_part(item, RANGE_KEY) != CLAIM_RANGE_KEY:
            raise self.corrupt(item, RANGE_KEY, repr(CLAIM_RANGE_KEY), f"is {self.key_part(item, RANGE_KEY)!r}")
        return self._heartbeat(item, self.string(item, WORKER_ID))

    def identity(self, item: Item) -> StreamIdentity:
        arn, created = self.string(item, STREAM_ARN), self.string(item, STREAM_CREATED)
        try:
            return StreamIdentity.from_dict({"arn": arn, "created": created})
        except (KinesisSourceError, ValueError) as exc:
            raise self.corrupt(item, STREAM_CREATED, "an ISO-8601 UTC timestamp", f"is {created!r} ({exc})") from None

    def session(self, item: Item) -> str:
        return self.string(item, SESSION)

    def heartbeat_value(self, item: Item) -> int:
        return self.number(item, HEARTBEAT)

    def changes_value(self, item: Item) -> int:
        return self.number(item, LEASE_CHANGES) if LEASE_CHANGES in item else 0

    def _heartbeat(self, item: Item, worker_id: str) -> WorkerHeartbeat:
        return WorkerHeartbeat(
            worker_id=worker_id,
            session=self.string(item, SESSION),
            heartbeat=self.number(item, HEARTBEAT),
            last_updated_ms=self.number(item, LAST_UPDATED),
            changes=self.number(item, LEASE_CHANGES) if LEASE_CHANGES in item else 0,
            notify=self.strings(item, LEASE_NOTIFY) if LEASE_NOTIFY in item else (),
        )

    def _checkpoint(self, item: Item) -> Checkpoint:
        text = self.string(item, CHECKPOINT)
        sub = self.number(item, CHECKPOINT_SUB_SEQUENCE)
        kind = _SENTINELS.get(text)
        try:
            if kind is CheckpointKind.AT_TIMESTAMP:
                return Checkpoint.at_timestamp(self.string(item, CHECKPOINT_TIMESTAMP))
            if kind is not None:
                return Checkpoint(kind)
            return Checkpoint.sequence(text, sub)
        except InvalidPositionError as exc:
            attribute = CHECKPOINT_TIMESTAMP if kind is CheckpointKind.AT_TIMESTAMP else CHECKPOINT
            raise self.corrupt(
                item, attribute,
                "TRIM_HORIZON, LATEST, AT_TIMESTAMP (with checkpointTimestamp), SHARD_END or a decimal "
                "sequence number",
                f"is invalid ({exc})",
            ) from None

    def _hash_range(self, item: Item) -> HashRange:
        bounds = []
        for attribute in (STARTING_HASH_KEY, ENDING_HASH_KEY):
            text = self.string(item, attribute)
            if not text.isdigit() or len(text) > 39:
                raise self.corrupt(item, attribute, "a decimal hash key in 0..2**128-1", f"is {text!r}")
            bounds.append(int(text))
        try:
            return HashRange(bounds[0], bounds[1])
        except ValueError as exc:
            raise self.corrupt(item, ENDING_HASH_KEY, "a range start <= end within 0..2**128-1", f"is invalid ({exc})") from None
