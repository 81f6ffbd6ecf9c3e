"""The lease table's conditional writes, for one application's stream.

A coordination write that loses a race returns None or False (as in the KCL); a write only the
holder may make raises :class:`LeaseLostError` (docs/leases.md, "Operations")."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..aws.dynamodb import DynamoDBClient, Item, WriteResult
from ..aws.dynamodb_tables import create_table_if_missing, describe_table, ensure_ttl
from ..errors import (
    IncompatibleLeaseTableError,
    InvalidPositionError,
    LeaseLostError,
)
from ..in_place import run_sync
from ..names import validate_name, validate_table_name
from ..positions import format_timestamp
from .heartbeat_items import HeartbeatItems
from .layout import LeaseLayout, validate_lease_partitions
from .layout_records import LayoutRecords
from .model import (
    Checkpoint,
    CheckpointKind,
    Lease,
    TableView,
    Throughput,
    WorkerHeartbeat,
)
from .schema.keys import (
    EXPECTED_KEY_SCHEMA,
    HASH_KEY,
    LEASE_PREFIX,
    RANGE_KEY,
    TTL_ATTRIBUTE,
    WORKER_PREFIX,
    lease_key,
    lease_partition,
)
from .schema.lease_items import (
    CHECKPOINT,
    CHECKPOINT_SUB_SEQUENCE,
    CHECKPOINT_TIMESTAMP,
    CHILD_SHARD_IDS,
    LAST_UPDATED,
    LEASE_COUNTER,
    LEASE_OWNER,
    OWNER_SWITCHES,
    STEAL_REQUEST,
    THROUGHPUT_AT,
    THROUGHPUT_BYTES,
    THROUGHPUT_RECORDS,
    LeaseCodec,
    throughput_values,
)
from .schema.values import number_value, string_value
from .shard_end import ShardEndWrites

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")
_SCOPE = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def _wall_ms() -> int:
    return int(time.time() * 1000)

_RELEASE = "SET #counter = :next, #updated = :now REMOVE #owner, #req"  # counter + 1: the old holder is fenced


def _created(lease: Lease, result: WriteResult) -> bool:
    if result.ok:
        log.debug("created %s", lease.describe())
    return result.ok


def _take(new_owner: str) -> tuple[str, dict[str, Any]]:
    return ("SET #owner = :new, #counter = :next, #switches = #switches + :one, #updated = :now REMOVE #req",
            {":new": string_value(new_owner), ":one": number_value(1)})


def _steal_request(thief: str) -> tuple[str, dict[str, Any]]:
    return "SET #req = :thief, #updated = :now", {":thief": string_value(thief)}

# -- the table ----------------------------------------------------------------------


@dataclass
class LeaseTable(LayoutRecords, ShardEndWrites, HeartbeatItems):
    """One application's leases on one stream, in a (possibly shared) DynamoDB table. ``scope``: a
    separate set of leases and heartbeats (a sticky ``KeyRange``'s own; "": the stream's).
    ``lease_partitions``: how many keys a *new* set is spread over (:mod:`.layout`)."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    now_ms: Callable[[], int] = field(default=_wall_ms, repr=False)
    scope: str = ""
    lease_partitions: int | None = None

    def __post_init__(self) -> None:
        validate_table_name(self.table_name)
        validate_name(self.application, "applicationName")
        validate_name(self.stream, "streamName")
        if self.scope and not _SCOPE.fullmatch(self.scope):
            raise ValueError(f"lease scope {self.scope!r} must be 1-200 characters from A-Z a-z 0-9 _ . -")
        validate_lease_partitions(self.lease_partitions)
        self.partition = lease_partition(self.application, self.stream, self.scope)
        self.codec = LeaseCodec(self.table_name)
        self._layout: LeaseLayout | None = None  # once recorded, a layout never changes

    # -- table management ----------------------------------------------------------

    def ensure_table(self, create: bool = True, timeout_s: float = 120.0) -> bool:
        return run_sync(self.aensure_table(self._in_place(), create, timeout_s))

    async def aensure_table(self, dynamodb: AsyncDynamoDB, create: bool = True, timeout_s: float = 120.0) -> bool:
        """Make sure the table exists with the lease key schema; returns True if created now. With
        ``create``, TTL on ``ttl`` is enabled if it is off, on an existing table too, but only once
        the key schema shows a kinesis-src table."""
        if create:
            description, created = await create_table_if_missing(dynamodb, self.table_name, HASH_KEY, RANGE_KEY,
                                                                  timeout_s)
        else:
            description, created = await describe_table(dynamodb, self.table_name, must_exist=True), False
        assert description is not None
        if tuple(description.key_schema) != EXPECTED_KEY_SCHEMA:
            found = ", ".join(f"{name} {kind} ({typ})" for name, kind, typ in description.key_schema)
            raise IncompatibleLeaseTableError(
                f"DynamoDB table {self.table_name!r} at {self.dynamodb.endpoint} exists with key schema "
                f"[{found}], but a kinesis-src lease table needs [pk HASH (S), sk RANGE (S)]. It was "
                "probably made by another tool (a KCL application uses leaseKey): set leaseTableName "
                "to another table, or delete this one."
            )
        if create:
            await ensure_ttl(dynamodb, self.table_name, TTL_ATTRIBUTE)
        if created:
            log.info("created lease table %r at %s", self.table_name, self.dynamodb.endpoint)
        return created

    # -- reads ------------------------------------------------------------------------

    def scan(self) -> TableView:
        return run_sync(self.ascan(self._in_place()))

    async def ascan(self, dynamodb: AsyncDynamoDB) -> TableView:
        """Leases and heartbeats of this application+stream: one consistent Query per partition key,
        the heartbeats' last (so an owner is judged by a heartbeat read after its leases)."""
        partitions = self._scan_partitions(await self.alayout(dynamodb))
        return self._view([item for partition in partitions
                           for item in await dynamodb.query(self.table_name, HASH_KEY, partition)])

    def _scan_partitions(self, layout: LeaseLayout) -> list[str]:
        """The lease partitions, then the heartbeats' own one."""
        return [p for p in layout.lease_partitions() if p != self.partition] + [self.partition]

    def _view(self, items: list[Item]) -> TableView:
        leases: dict[str, Lease] = {}
        workers: dict[str, WorkerHeartbeat] = {}
        for item in items:
            sk = self.codec.key_part(item, RANGE_KEY)
            if sk.startswith(LEASE_PREFIX):
                lease = self.codec.lease(item)
                leases[lease.shard_id] = lease
            elif sk.startswith(WORKER_PREFIX):
                worker = self.codec.worker(item)
                workers[worker.worker_id] = worker
            else:
                raise self.codec.corrupt(item, RANGE_KEY, "a sort key starting with shard# or worker#", f"is {sk!r}")
        return TableView(leases, workers)

    def list_workers(self) -> dict[str, WorkerHeartbeat]:
        return run_sync(self.alist_workers(self._in_place()))

    async def alist_workers(self, dynamodb: AsyncDynamoDB) -> dict[str, WorkerHeartbeat]:
        """The heartbeat items alone: one consistent Query over the ``worker#`` sort keys."""
        items = await dynamodb.query(self.table_name, HASH_KEY, self.partition, RANGE_KEY, WORKER_PREFIX)
        workers = (self.codec.worker(item) for item in items)
        return {worker.worker_id: worker for worker in workers}

    def list_leases(self) -> list[Lease]:
        return run_sync(self.alist_leases(self._in_place()))

    async def alist_leases(self, dynamodb: AsyncDynamoDB) -> list[Lease]:
        return [self.codec.lease(item) for partition in (await self.alayout(dynamodb)).lease_partitions()
                for item in await dynamodb.query(self.table_name, HASH_KEY, partition, RANGE_KEY, LEASE_PREFIX)]

    def get_lease(self, shard_id: str) -> Lease | None:
        return run_sync(self.aget_lease(self._in_place(), shard_id))

    async def aget_lease(self, dynamodb: AsyncDynamoDB, shard_id: str) -> Lease | None:
        layout = await self.alayout(dynamodb)
        item = await dynamodb.get_item(self.table_name, lease_key(layout.partition_of(shard_id), shard_id))
        return None if item is None else self.codec.lease(item)

    def _in_place(self) -> BotocoreDynamoDB:
        """The table's own client, for a step run in place (:func:`~kinesis_src.in_place.run_sync`)."""
        return BotocoreDynamoDB(self.dynamodb)

    # -- lease writes -----------------------------------------------------------------

    def create_lease(self, lease: Lease) -> bool:
        """Put-if-absent; False when a lease for the shard already exists (idempotent create)."""
        return run_sync(self.acreate_lease(self._in_place(), lease))

    async def acreate_lease(self, dynamodb: AsyncDynamoDB, lease: Lease) -> bool:
        return _created(lease, await dynamodb.put_item(**self.creation(await self.aensure_layout(dynamodb), lease)))

    def creation(self, layout: LeaseLayout, lease: Lease) -> dict[str, Any]:
        """PutItem arguments creating ``lease`` if absent, in ``layout``'s partition for its shard."""
        item = self.codec.lease_item(layout.partition_of(lease.shard_id), replace(lease, last_updated_ms=self.now_ms()))
        return {"table": self.table_name, "item": item, "condition": "attribute_not_exists(#pk)",
                "names": {"#pk": HASH_KEY}}

    def take_lease(self, lease: Lease, new_owner: str) -> Lease | None:
        return run_sync(self.atake_lease(self._in_place(), lease, new_owner))

    async def atake_lease(self, dynamodb: AsyncDynamoDB, lease: Lease, new_owner: str) -> Lease | None:
        """Take an unowned or expired lease (or steal a live one): None if it changed meanwhile.
        A steal request on it is for the previous holder: removed."""
        return self._lease_or_none(await self._update_held(dynamodb, lease, *_take(new_owner)))

    steal_lease = take_lease  # same conditional write; the caller logs it as a steal

    def request_steal(self, lease: Lease, thief: str) -> Lease | None:
        return run_sync(self.arequest_steal(self._in_place(), lease, thief))

    async def arequest_steal(self, dynamodb: AsyncDynamoDB, lease: Lease, thief: str) -> Lease | None:
        """Ask the holder to release ``lease`` (:mod:`.steal_requests`); None if it changed since.
        Conditional on the owner and counter read; the counter stays, so the holder's checkpoints
        still succeed."""
        return self._lease_or_none(await self._update_held(dynamodb, lease, *_steal_request(thief)))

    def renew_lease(self, lease: Lease) -> Lease | None:
        """KCL-style renewal (counter + 1 by the holder). kinesis-src renews by heartbeat instead;
        this exists for the cost comparison in benchmarks/bench_leases.py."""
        update = "SET #counter = :next, #updated = :now"
        return self._lease_or_none(run_sync(self._update_held(self._in_place(), lease, update)))

    def release_lease(self, lease: Lease) -> Lease | None:
        return run_sync(self.arelease_lease(self._in_place(), lease))

    async def arelease_lease(self, dynamodb: AsyncDynamoDB, lease: Lease) -> Lease | None:
        """Give the lease up (graceful hand-off): unowned, counter + 1 so the old holder is fenced."""
        return self._lease_or_none(await self._update_held(dynamodb, lease, _RELEASE))

    def checkpoint(self, lease: Lease, checkpoint: Checkpoint, throughput: Throughput | None = None) -> Lease:
        return run_sync(self.acheckpoint(self._in_place(), lease, checkpoint, throughput))

    async def acheckpoint(self, dynamodb: AsyncDynamoDB, lease: Lease, checkpoint: Checkpoint,
                          throughput: Throughput | None = None) -> Lease:
        """Record progress (and the shard's throughput estimate, in the same write); only the holder
        at the lease's counter may. Raises LeaseLostError."""
        result = await self._update_held(dynamodb, lease, *self._progress_update(checkpoint, throughput))
        return self._lease_or_lost(lease, result, f"checkpoint {checkpoint}")

    def _progress_update(self, checkpoint: Checkpoint, throughput: Throughput | None) -> tuple[str, dict[str, Any]]:
        if checkpoint.is_shard_end:
            raise InvalidPositionError("SHARD_END is recorded with mark_shard_end(), which also creates the children")
        update, values = self._checkpoint_update(checkpoint)
        update += ", #switches = :zero, #updated = :now"
        if throughput is not None:
            update += ", #tr = :tr, #tb = :tb, #tat = :tat"
            values.update(throughput_values(throughput, ":tr", ":tb", ":tat"))
        return update, values

    def delete_lease(self, lease: Lease, only_if_shard_end: bool) -> bool:
        return run_sync(self.adelete_lease(self._in_place(), lease, only_if_shard_end))

    async def adelete_lease(self, dynamodb: AsyncDynamoDB, lease: Lease, only_if_shard_end: bool) -> bool:
        """Delete a drained (or trimmed) lease, unless it changed since ``lease`` was read."""
        condition, names = "#counter = :cur", {"#counter": LEASE_COUNTER}
        values = {":cur": number_value(lease.counter)}
        if only_if_shard_end:
            condition += " AND #cp = :end"
            names["#cp"] = CHECKPOINT
            values[":end"] = string_value(CheckpointKind.SHARD_END.value)
        key = self._key_in(await self.alayout(dynamodb), lease.shard_id)
        return (await dynamodb.delete_item(self.table_name, key, condition, names=names, values=values)).ok

    async def _update_held(self, dynamodb: AsyncDynamoDB, lease: Lease, update: str,
                           values: Mapping[str, Any] | None = None) -> WriteResult:
        """A conditional update on the expected owner and counter (the fencing condition)."""
        request = self._held_request(lease, update, values or {}, self.now_ms(), await self.alayout(dynamodb))
        return await dynamodb.update_item(
            self.table_name, request["Key"], update, request["ConditionExpression"],
            names=request["ExpressionAttributeNames"], values=request["ExpressionAttributeValues"])

    def _held_request(self, lease: Lease, update: str, values: Mapping[str, Any], now: int,
                      layout: LeaseLayout) -> dict[str, Any]:
        """UpdateItem arguments (also a TransactWriteItems Update) fenced on owner and counter."""
        names = {
            "#owner": LEASE_OWNER, "#counter": LEASE_COUNTER, "#switches": OWNER_SWITCHES,
            "#updated": LAST_UPDATED, "#cp": CHECKPOINT, "#sub": CHECKPOINT_SUB_SEQUENCE,
            "#cpts": CHECKPOINT_TIMESTAMP, "#children": CHILD_SHARD_IDS,
            "#tr": THROUGHPUT_RECORDS, "#tb": THROUGHPUT_BYTES, "#tat": THROUGHPUT_AT, "#req": STEAL_REQUEST,
        }
        all_values: dict[str, Any] = {
            ":cur": number_value(lease.counter), ":now": number_value(now), ":zero": number_value(0),
            ":next": number_value(lease.counter + 1),
        }
        all_values.update(values)
        if lease.owner is None:
            condition = "#counter = :cur AND attribute_not_exists(#owner)"
        else:
            condition = "#counter = :cur AND #owner = :owner"
            all_values[":owner"] = string_value(lease.owner)
        used = set(_TOKEN.findall(update + " " + condition))
        return {
            "TableName": self.table_name,
            "Key": self._key_in(layout, lease.shard_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in names.items() if k in used},
            "ExpressionAttributeValues": {k: v for k, v in all_values.items() if k in used},
        }

    def _checkpoint_update(self, checkpoint: Checkpoint) -> tuple[str, dict[str, Any]]:
        values = {
            ":cp": string_value(self.codec.checkpoint_text(checkpoint)),
            ":sub": number_value(checkpoint.sub_sequence_number),
        }
        if checkpoint.timestamp is not None:
            values[":cpts"] = string_value(format_timestamp(checkpoint.timestamp))
            return "SET #cp = :cp, #sub = :sub, #cpts = :cpts", values
        return "REMOVE #cpts SET #cp = :cp, #sub = :sub", values

    def _lease_or_none(self, result: WriteResult) -> Lease | None:
        return self.codec.lease(result.item) if result.ok and result.item else None

    def fence(self, lease: Lease) -> dict[str, Any]:
        """A TransactWriteItems ConditionCheck: "``lease`` is still held as read". Put it next to a
        write only the holder may make: the transaction fails as a whole if the lease moved on, and
        the lease item itself is never written."""
        if lease.owner is None:
            raise LeaseLostError(f"lease on shard {lease.shard_id} has no owner: nothing to fence on", lease.shard_id)
        return {
            "ConditionCheck": {
                "TableName": self.table_name,
                "Key": self._lease_key(lease.shard_id),
                "ConditionExpression": "#counter = :cur AND #owner = :owner",
                "ExpressionAttributeNames": {"#counter": LEASE_COUNTER, "#owner": LEASE_OWNER},
                "ExpressionAttributeValues": {
                    ":cur": number_value(lease.counter), ":owner": string_value(lease.owner),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _lease_or_lost(self, lease: Lease, result: WriteResult, what: str) -> Lease:
        if result.ok and result.item:
            return self.codec.lease(result.item)
        raise self.lost_error(lease, result.item, what)

    def lost_error(self, lease: Lease, current: Item | None, what: str) -> LeaseLostError:
        """The error for a fenced write that failed; ``current`` is the lease item as it stands."""
        now = "no longer exists" if current is None else self.codec.lease(current).describe()
        return LeaseLostError(
            f"{what} on shard {lease.shard_id} of stream {self.stream!r} (application "
            f"{self.application!r}, table {self.table_name!r}) rejected: the write was fenced on owner "
            f"{lease.owner} and counter {lease.counter}, but the lease {now}. Stop processing this "
            "shard; its new owner resumes from the last successful checkpoint.",
            lease.shard_id,
        )

    def _lease_key(self, shard_id: str) -> Item:
        return self._key_in(self.layout(), shard_id)

    @staticmethod
    def _key_in(layout: LeaseLayout, shard_id: str) -> Item:
        return lease_key(layout.partition_of(shard_id), shard_id)
