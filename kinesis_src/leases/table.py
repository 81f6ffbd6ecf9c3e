"""The lease table's conditional writes, for one application's stream.

Writes are conditional requests: coordination writes (create, take, steal,
renew, release, delete, heartbeat) return None/False when they lose a race
("False = lease lost", as in the KCL); writes that only the holder may make
(checkpoint, SHARD_END) raise :class:`LeaseLostError` because a failure
there means the caller must stop. SHARD_END and the child leases are one
transaction, fenced like a checkpoint. Item layouts and attribute names
live in :mod:`.serializer`.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ..aws.dynamodb import DynamoDBClient, Item, WriteResult
from ..errors import (
    AccessDeniedError,
    IncompatibleLeaseTableError,
    InvalidPositionError,
    KinesisSourceError,
    LeaseLostError,
)
from ..names import validate_name, validate_table_name, validate_worker_id
from ..positions import format_timestamp
from .layout import (
    LAYOUT_RANGE_KEY,
    LEASE_PARTITIONS,
    MAX_LEASE_PARTITIONS,
    LeaseLayout,
    layout_partition,
    partitions_for,
    validate_lease_partitions,
)
from .model import (
    Checkpoint,
    CheckpointKind,
    HeartbeatStatus,
    Lease,
    ShardEndResult,
    TableView,
    Throughput,
    WorkerHeartbeat,
)
from .serializer import (
    CHECKPOINT,
    CHECKPOINT_SUB_SEQUENCE,
    CHECKPOINT_TIMESTAMP,
    CHILD_SHARD_IDS,
    EXPECTED_KEY_SCHEMA,
    HASH_KEY,
    HEARTBEAT,
    HEARTBEAT_TTL_S,
    LAST_UPDATED,
    LEASE_CHANGES,
    LEASE_COUNTER,
    LEASE_OWNER,
    LEASE_PREFIX,
    OWNER_SWITCHES,
    RANGE_KEY,
    SESSION,
    THROUGHPUT_AT,
    THROUGHPUT_BYTES,
    THROUGHPUT_RECORDS,
    TTL_ATTRIBUTE,
    WORKER_PREFIX,
    LeaseCodec,
    _list,
    _n,
    _s,
    claim_key,
    lease_key,
    lease_partition,
    throughput_values,
    worker_key,
)

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")
_SCOPE = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def _wall_ms() -> int:
    return int(time.time() * 1000)

# -- the table ----------------------------------------------------------------------


@dataclass
class LeaseTable:
    """One application's leases on one stream, in a (possibly shared) DynamoDB table.

    ``scope`` names a separate set of leases and heartbeats on the same
    stream: a sticky key range's readers (``KeyRange``) hold their own
    lease per shard, so their checkpoints are per (shard, range). "" is the
    stream's ordinary leases.

    ``lease_partitions``: over how many partition keys a *new* set of leases
    is spread (:mod:`.layout`); None: one per 1,000 shards at the first shard
    sync. The layout recorded in the table wins over it.
    """

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

    # -- layout (:mod:`.layout`) --------------------------------------------------------

    def layout(self) -> LeaseLayout:
        """The recorded layout; without a record, the single key (an earlier version's leases there
        get their P = 1 recorded now, so later calls need no read)."""
        if self._layout is not None:
            return self._layout
        item = self.dynamodb.get_item(self.table_name, self._layout_key())
        if item is not None:
            return self._keep(item)
        if self._legacy_leases():
            return self._record(1)
        return LeaseLayout(self.partition)

    def known_partitions(self) -> int:
        """The recorded partition count, without a request (1 while none is known)."""
        return 1 if self._layout is None else self._layout.partitions

    def ensure_layout(self, expected_leases: int | None = None) -> LeaseLayout:
        """The layout, recorded now if missing (before the first lease is created): P = 1 over an
        earlier version's leases, else ``lease_partitions``, else one per 1,000 expected leases."""
        layout = self.layout()
        if layout.recorded:
            return layout
        return self._record(self.lease_partitions or partitions_for(expected_leases or 0))

    def _record(self, partitions: int) -> LeaseLayout:
        item = {**self._layout_key(), LEASE_PARTITIONS: _n(partitions)}
        try:
            if self.dynamodb.put_item(self.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY}).ok:
                self._layout = LeaseLayout(self.partition, partitions, recorded=True)
                log.info("lease layout of %s: %d partition key(s)", self.partition, partitions)
                return self._layout
        except AccessDeniedError as exc:  # a read-only user (the CLI): the earlier version's single key
            log.debug("could not record the lease layout of %s: %s", self.partition, exc)
            return LeaseLayout(self.partition)
        stored = self.dynamodb.get_item(self.table_name, self._layout_key())  # a concurrent first writer's
        return self._keep(stored) if stored is not None else LeaseLayout(self.partition)

    def _keep(self, item: Item) -> LeaseLayout:
        partitions = self.codec.number(item, LEASE_PARTITIONS)
        if not 1 <= partitions <= MAX_LEASE_PARTITIONS:
            raise self.codec.corrupt(item, LEASE_PARTITIONS, f"an integer in 1..{MAX_LEASE_PARTITIONS}", f"is {partitions}")
        if self.lease_partitions is not None and partitions != self.lease_partitions:
            log.warning("lease_partitions=%d ignored: the leases of %s are spread over %d partition key(s) "
                        "already", self.lease_partitions, self.partition, partitions)
        self._layout = LeaseLayout(self.partition, partitions, recorded=True)
        return self._layout

    def _legacy_leases(self) -> bool:
        return bool(self.dynamodb.query(self.table_name, HASH_KEY, self.partition, RANGE_KEY, LEASE_PREFIX, limit=1))

    def _layout_key(self) -> Item:
        return {HASH_KEY: _s(layout_partition(self.application, self.stream, self.scope)),
                RANGE_KEY: _s(LAYOUT_RANGE_KEY)}

    # -- table management ----------------------------------------------------------

    def ensure_table(self, create: bool = True, timeout_s: float = 120.0) -> bool:
        """Make sure the table exists with the lease key schema; returns True if created now.

        With ``create``, TTL is enabled on ``ttl`` if it is off, on an existing
        table too (its creator may have died before enabling it), but only
        once the key schema shows the table is a kinesis-src one.
        """
        if create:
            description, created = self.dynamodb.create_table_if_missing(
                self.table_name, HASH_KEY, RANGE_KEY, timeout_s
            )
        else:
            description, created = self.dynamodb.describe_table(self.table_name), False
            if description is None:
                raise self.dynamodb.table_missing(self.table_name, "DescribeTable")
        if tuple(description.key_schema) != EXPECTED_KEY_SCHEMA:
            found = ", ".join(f"{name} {kind} ({typ})" for name, kind, typ in description.key_schema)
            raise IncompatibleLeaseTableError(
                f"DynamoDB table {self.table_name!r} at {self.dynamodb.endpoint} exists with key schema "
                f"[{found}], but a kinesis-src lease table needs [pk HASH (S), sk RANGE (S)]. It was "
                "probably made by another tool (a KCL application uses leaseKey): set leaseTableName "
                "to another table, or delete this one."
            )
        if create:
            self.dynamodb.ensure_ttl(self.table_name, TTL_ATTRIBUTE)
        if created:
            log.info("created lease table %r at %s", self.table_name, self.dynamodb.endpoint)
        return created

    # -- reads ------------------------------------------------------------------------

    def scan(self) -> TableView:
        """Leases and heartbeats of this application+stream: one consistent Query per partition key,
        the heartbeats' last (so an owner is judged by a heartbeat read after its leases)."""
        layout = self.layout()
        leases: dict[str, Lease] = {}
        workers: dict[str, WorkerHeartbeat] = {}
        items = [item for partition in layout.lease_partitions() if partition != self.partition
                 for item in self.dynamodb.query(self.table_name, HASH_KEY, partition)]
        items += self.dynamodb.query(self.table_name, HASH_KEY, self.partition)
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
        """The heartbeat items alone: one consistent Query over the ``worker#`` sort keys (~1 RCU)."""
        items = self.dynamodb.query(self.table_name, HASH_KEY, self.partition, RANGE_KEY, WORKER_PREFIX)
        workers = (self.codec.worker(item) for item in items)
        return {worker.worker_id: worker for worker in workers}

    def list_leases(self) -> list[Lease]:
        return [
            self.codec.lease(item)
            for partition in self.layout().lease_partitions()
            for item in self.dynamodb.query(self.table_name, HASH_KEY, partition, RANGE_KEY, LEASE_PREFIX)
        ]

    def get_lease(self, shard_id: str) -> Lease | None:
        item = self.dynamodb.get_item(self.table_name, self._lease_key(shard_id))
        return None if item is None else self.codec.lease(item)

    # -- lease writes -----------------------------------------------------------------

    def create_lease(self, lease: Lease) -> bool:
        """Put-if-absent; False when a lease for the shard already exists (idempotent create)."""
        partition = self.ensure_layout().partition_of(lease.shard_id)
        item = self.codec.lease_item(partition, replace(lease, last_updated_ms=self.now_ms()))
        result = self.dynamodb.put_item(
            self.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY}
        )
        if result.ok:
            log.debug("created %s", lease.describe())
        return result.ok

    def take_lease(self, lease: Lease, new_owner: str) -> Lease | None:
        """Take an unowned or expired lease (or steal a live one): None if it changed meanwhile."""
        result = self._update_held(
            lease,
            "SET #owner = :new, #counter = :next, #switches = #switches + :one, #updated = :now",
            values={":new": _s(new_owner), ":one": _n(1)},
        )
        return self._lease_or_none(result)

    steal_lease = take_lease  # same conditional write; the caller logs it as a steal

    def renew_lease(self, lease: Lease) -> Lease | None:
        """KCL-style renewal (counter + 1 by the holder). kinesis-src renews by heartbeat instead;
        this exists for the cost comparison in benchmarks/bench_leases.py."""
        return self._lease_or_none(self._update_held(lease, "SET #counter = :next, #updated = :now"))

    def release_lease(self, lease: Lease) -> Lease | None:
        """Give the lease up (graceful hand-off): unowned, counter + 1 so the old holder is fenced."""
        result = self._update_held(lease, "SET #counter = :next, #updated = :now REMOVE #owner")
        return self._lease_or_none(result)

    def checkpoint(self, lease: Lease, checkpoint: Checkpoint, throughput: Throughput | None = None) -> Lease:
        """Record progress (and the shard's throughput estimate, in the same write); only the holder
        at the lease's counter may. Raises LeaseLostError."""
        if checkpoint.is_shard_end:
            raise InvalidPositionError("SHARD_END is recorded with mark_shard_end(), which also creates the children")
        update, values = self._checkpoint_update(checkpoint)
        update += ", #switches = :zero, #updated = :now"
        if throughput is not None:
            update += ", #tr = :tr, #tb = :tb, #tat = :tat"
            values.update(throughput_values(throughput, ":tr", ":tb", ":tat"))
        result = self._update_held(lease, update, values=values)
        return self._lease_or_lost(lease, result, f"checkpoint {checkpoint}")

    def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        """Mark the parent SHARD_END and unowned, and create its child leases: one transaction.

        The transaction is fenced on the parent's owner and counter, so a
        zombie (a replaced holder that resumes) creates nothing: a plain
        put-if-absent would recreate a child that was drained and cleaned
        up, at TRIM_HORIZON. A child that exists already (the other parent
        of a merge ended first, or shard sync listed it) is left as it is:
        the transaction is sent again without it. A retry of our own write
        that landed (its answer was lost) is a success, not a lost lease.
        """
        ids = tuple(c.shard_id for c in children) or lease.child_shard_ids
        now = self.now_ms()
        parent = self._held_request(
            lease,
            "SET #cp = :end, #sub = :zero, #children = :children, #counter = :next, #switches = :zero, "
            "#updated = :now REMOVE #owner, #cpts",
            {":end": _s(CheckpointKind.SHARD_END.value), ":children": _list(ids)},
            now,
        )
        parent["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        pending, existing = list(children), []
        while True:
            actions = [{"Update": parent}, *({"Put": self._child_put(c, now)} for c in pending)]
            outcome = self.dynamodb.transact_write(self.table_name, actions)
            if outcome.committed:
                ended = self._ended(lease, ids, now)
                return ShardEndResult(ended, tuple(c.shard_id for c in pending), tuple(existing))
            parent_reason = outcome.reasons[0] if outcome.reasons else "unknown"
            if parent_reason != "None":
                return self._shard_end_landed(lease, ids, outcome.items[0] if outcome.items else None, parent_reason)
            exists = self._existing_children(outcome.reasons[1:], pending)
            existing.extend(exists)
            pending = [c for c in pending if c.shard_id not in exists]

    def _child_put(self, child: Lease, now: int) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "Item": self.codec.lease_item(self.ensure_layout().partition_of(child.shard_id),
                                          replace(child, last_updated_ms=now)),
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": HASH_KEY},
        }

    def _existing_children(self, reasons: Sequence[str], pending: Sequence[Lease]) -> list[str]:
        """The children whose put-if-absent failed: they exist. Any other reason is an error."""
        exists = [child.shard_id for child, code in zip(pending, reasons) if code == "ConditionalCheckFailed"]
        unexpected = sorted({code for code in reasons if code not in ("None", "ConditionalCheckFailed")})
        if unexpected or not exists:
            raise KinesisSourceError(
                f"SHARD_END transaction on table {self.table_name!r} cancelled for reasons "
                f"{', '.join(unexpected) or 'none given'} on the child leases {[c.shard_id for c in pending]}"
            )
        return exists

    def _ended(self, lease: Lease, ids: tuple[str, ...], now: int) -> Lease:
        """The parent as the committed transaction wrote it (transactions return no item)."""
        return replace(
            lease, checkpoint=Checkpoint.shard_end(), owner=None, counter=lease.counter + 1,
            child_shard_ids=ids, owner_switches_since_checkpoint=0, last_updated_ms=now,
        )

    def _shard_end_landed(self, lease: Lease, ids: tuple[str, ...], current: Item | None, reason: str) -> ShardEndResult:
        """The parent's condition failed: success if the item is our own landed SHARD_END, else lost."""
        if reason != "ConditionalCheckFailed":
            raise KinesisSourceError(f"SHARD_END transaction on table {self.table_name!r} cancelled: {reason}")
        stored = None if current is None else self.codec.lease(current)
        if stored is None or stored != self._ended(lease, ids, stored.last_updated_ms):  # not our own write
            raise self.lost_error(lease, current, "SHARD_END")
        log.info("SHARD_END of %s had landed already (a retried write): %s", lease.shard_id, stored.describe())
        return ShardEndResult(stored, (), ids)

    def delete_lease(self, lease: Lease, only_if_shard_end: bool) -> bool:
        """Delete a drained (or trimmed) lease, unless it changed since ``lease`` was read."""
        condition = "#counter = :cur"
        values = {":cur": _n(lease.counter)}
        if only_if_shard_end:
            condition += " AND #cp = :end"
            values[":end"] = _s(CheckpointKind.SHARD_END.value)
        result = self.dynamodb.delete_item(
            self.table_name,
            self._lease_key(lease.shard_id),
            condition,
            names={"#counter": LEASE_COUNTER, "#cp": CHECKPOINT} if only_if_shard_end else {"#counter": LEASE_COUNTER},
            values=values,
        )
        return result.ok

    def _update_held(self, lease: Lease, update: str, values: Mapping[str, Any] | None = None) -> WriteResult:
        """A conditional update on the expected owner and counter (the fencing condition)."""
        request = self._held_request(lease, update, values or {}, self.now_ms())
        return self.dynamodb.update_item(
            self.table_name,
            request["Key"],
            update,
            request["ConditionExpression"],
            names=request["ExpressionAttributeNames"],
            values=request["ExpressionAttributeValues"],
        )

    def _held_request(self, lease: Lease, update: str, values: Mapping[str, Any], now: int) -> dict[str, Any]:
        """UpdateItem arguments (also a TransactWriteItems Update) fenced on owner and counter."""
        names = {
            "#owner": LEASE_OWNER, "#counter": LEASE_COUNTER, "#switches": OWNER_SWITCHES,
            "#updated": LAST_UPDATED, "#cp": CHECKPOINT, "#sub": CHECKPOINT_SUB_SEQUENCE,
            "#cpts": CHECKPOINT_TIMESTAMP, "#children": CHILD_SHARD_IDS,
            "#tr": THROUGHPUT_RECORDS, "#tb": THROUGHPUT_BYTES, "#tat": THROUGHPUT_AT,
        }
        all_values: dict[str, Any] = {
            ":cur": _n(lease.counter), ":now": _n(now), ":zero": _n(0), ":next": _n(lease.counter + 1)
        }
        all_values.update(values)
        if lease.owner is None:
            condition = "#counter = :cur AND attribute_not_exists(#owner)"
        else:
            condition = "#counter = :cur AND #owner = :owner"
            all_values[":owner"] = _s(lease.owner)
        used = set(_TOKEN.findall(update + " " + condition))
        return {
            "TableName": self.table_name,
            "Key": self._lease_key(lease.shard_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in names.items() if k in used},
            "ExpressionAttributeValues": {k: v for k, v in all_values.items() if k in used},
        }

    def _checkpoint_update(self, checkpoint: Checkpoint) -> tuple[str, dict[str, Any]]:
        values = {":cp": _s(self.codec.checkpoint_text(checkpoint)), ":sub": _n(checkpoint.sub_sequence_number)}
        if checkpoint.timestamp is not None:
            values[":cpts"] = _s(format_timestamp(checkpoint.timestamp))
            return "SET #cp = :cp, #sub = :sub, #cpts = :cpts", values
        return "REMOVE #cpts SET #cp = :cp, #sub = :sub", values

    def _lease_or_none(self, result: WriteResult) -> Lease | None:
        return self.codec.lease(result.item) if result.ok and result.item else None

    def fence(self, lease: Lease) -> dict[str, Any]:
        """A TransactWriteItems ConditionCheck: "``lease`` is still held as read".

        Put it next to any write that only the holder may make (fenced
        progress): the transaction fails as a whole if the lease moved on,
        and the lease item itself is never written.
        """
        if lease.owner is None:
            raise LeaseLostError(f"lease on shard {lease.shard_id} has no owner: nothing to fence on", lease.shard_id)
        return {
            "ConditionCheck": {
                "TableName": self.table_name,
                "Key": self._lease_key(lease.shard_id),
                "ConditionExpression": "#counter = :cur AND #owner = :owner",
                "ExpressionAttributeNames": {"#counter": LEASE_COUNTER, "#owner": LEASE_OWNER},
                "ExpressionAttributeValues": {":cur": _n(lease.counter), ":owner": _s(lease.owner)},
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
        return lease_key(self.layout().partition_of(shard_id), shard_id)

    # -- worker heartbeats and the query claim ----------------------------------------

    def register_worker(self, worker_id: str) -> WorkerHeartbeat:
        """Write this process's heartbeat item (a new session); a previous process with the id loses."""
        return self._register(self._worker_key(worker_id), validate_worker_id(worker_id))

    def heartbeat(self, worker: WorkerHeartbeat, changed: bool = False) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        """Renew; with ``changed``, also announce that this worker changed lease ownership (:mod:`.view`)."""
        return self._beat(self._worker_key(worker.worker_id), worker, changed)

    def declare_worker_dead(self, worker: WorkerHeartbeat) -> bool:
        """Delete a heartbeat observed unchanged for the failover time, if still unchanged."""
        return self._delete_heartbeat(self._worker_key(worker.worker_id), worker, check_heartbeat=True)

    def deregister_worker(self, worker: WorkerHeartbeat) -> bool:
        return self._delete_heartbeat(self._worker_key(worker.worker_id), worker, check_heartbeat=False)

    def read_claim(self) -> WorkerHeartbeat | None:
        """The Spark query claim on this application+stream, if any (see :mod:`.claim`)."""
        item = self.dynamodb.get_item(self.table_name, self._claim_key())
        return None if item is None else self.codec.claim(item)

    def register_claim(self, holder: str) -> WorkerHeartbeat:
        return self._register(self._claim_key(), holder)

    def renew_claim(self, claim: WorkerHeartbeat) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        return self._beat(self._claim_key(), claim)

    def take_over_claim(self, claim: WorkerHeartbeat) -> bool:
        """Delete a claim observed unchanged for the failover time, if still unchanged."""
        return self._delete_heartbeat(self._claim_key(), claim, check_heartbeat=True)

    def release_claim(self, claim: WorkerHeartbeat) -> bool:
        return self._delete_heartbeat(self._claim_key(), claim, check_heartbeat=False)

    def _register(self, key: Item, worker_id: str) -> WorkerHeartbeat:
        worker = WorkerHeartbeat(worker_id, uuid.uuid4().hex[:12], 0, self.now_ms())
        self.dynamodb.put_item(self.table_name, self.codec.heartbeat_item(key, worker, self._ttl_s()))
        return worker

    def _beat(self, key: Item, worker: WorkerHeartbeat, changed: bool = False) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        """Add one to the stored heartbeat, conditional on our session only.

        Every write changes the value the others watch, a retry of a write
        that landed included (it adds one more): a worker that restarts its
        renewal clock after a RENEWED has always moved its heartbeat. The new
        value is read from the answer (ALL_NEW), so ours equals the stored one.
        """
        now = self.now_ms()
        names = {"#hb": HEARTBEAT, "#updated": LAST_UPDATED, "#ttl": TTL_ATTRIBUTE, "#session": SESSION}
        if changed:
            names["#changes"] = LEASE_CHANGES
        result = self.dynamodb.update_item(
            self.table_name,
            key,
            "SET #updated = :now, #ttl = :ttl ADD #hb :one" + (", #changes :one" if changed else ""),
            "#session = :session",
            names=names,
            values={":one": _n(1), ":now": _n(now), ":ttl": _n(self._ttl_s()), ":session": _s(worker.session)},
        )
        if result.ok and result.item:
            beat, changes = self.codec.heartbeat_value(result.item), self.codec.changes_value(result.item)
            return HeartbeatStatus.RENEWED, replace(worker, heartbeat=beat, last_updated_ms=now, changes=changes)
        if result.item is not None and self.codec.session(result.item) != worker.session:
            return HeartbeatStatus.REPLACED, worker
        return HeartbeatStatus.DECLARED_DEAD, worker

    def _delete_heartbeat(self, key: Item, worker: WorkerHeartbeat, check_heartbeat: bool) -> bool:
        condition = "#session = :session"
        names = {"#session": SESSION}
        values = {":session": _s(worker.session)}
        if check_heartbeat:
            condition += " AND #hb = :hb"
            names["#hb"] = HEARTBEAT
            values[":hb"] = _n(worker.heartbeat)
        return self.dynamodb.delete_item(self.table_name, key, condition, names=names, values=values).ok

    def _ttl_s(self) -> int:
        """``ttl`` of a heartbeat or claim item: a day after now, on DynamoDB's clock.

        DynamoDB's TTL sweeper compares ``ttl`` with its own time. A host
        wall clock that is years behind would write a ttl in the server's
        past and get live items deleted, so the server's time (the Date
        header of its last answer, plus the time elapsed here since) bounds
        it from below. A wall clock that is ahead only delays the clean-up.
        """
        server_s = self.dynamodb.server_time_s()
        now_s = max(self.now_ms() // 1000, 0 if server_s is None else int(server_s))
        return now_s + HEARTBEAT_TTL_S

    def _worker_key(self, worker_id: str) -> Item:
        return worker_key(self.partition, worker_id)

    def _claim_key(self) -> Item:
        return claim_key(self.application, self.stream)
