"""The DynamoDB lease table: key layout, Lease <-> item, and the conditional writes.

One table serves any number of applications and streams. Every item is
namespaced by its partition key (hash key ``pk``, range key ``sk``, both S):

==========================================  ============================  ===========
pk                                          sk                            item
==========================================  ============================  ===========
``lease#<application>#<stream>``            ``shard#<shardId>``           shard lease
``lease#<application>#<stream>``            ``worker#<workerId>``         heartbeat
``progress#<app>#<stream>#<run>#<batch>``   ``shard#<shardId>``           see progress
==========================================  ============================  ===========

Leases and heartbeats of one application+stream share a partition, so one
consistent Query reads the whole coordination state (one request per 1 MB,
about 3,000 leases). Application and stream names are restricted to
``[A-Za-z0-9_.-]`` (the characters Kinesis allows in stream names), so ``#``
cannot make two namespaces collide.

Every DynamoDB attribute name of leases and heartbeats is defined in this
module and nowhere else. Writes are single conditional requests:
coordination writes (create, take, steal, renew, release, delete, heartbeat)
return None/False when they lose a race ("False = lease lost", as in the
KCL); writes that only the holder may make (checkpoint, SHARD_END) raise
:class:`LeaseLostError` because a failure there means the caller must stop.
"""

from __future__ import annotations

import enum
import logging
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from lineage import HashRange, Shard, shard_sort_key

from .aws.dynamodb import DynamoDBClient, Item, WriteResult
from .errors import (
    ConfigurationError,
    CorruptLeaseError,
    IncompatibleLeaseTableError,
    InvalidPositionError,
    LeaseLostError,
)
from .positions import (
    Position,
    PositionKind,
    format_timestamp,
    parse_timestamp,
    validate_sequence_number,
)
from .records import ChildShard

log = logging.getLogger(__name__)

# -- key layout -------------------------------------------------------------------

HASH_KEY = "pk"
RANGE_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
EXPECTED_KEY_SCHEMA = ((HASH_KEY, "HASH", "S"), (RANGE_KEY, "RANGE", "S"))
LEASE_PREFIX = "shard#"
WORKER_PREFIX = "worker#"

# -- attribute names (leases and heartbeats) ----------------------------------------

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

HEARTBEAT_TTL_S = 24 * 3600  # garbage collection of dead workers' items only; never used for expiry

_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")


def _wall_ms() -> int:
    return int(time.time() * 1000)


def validate_name(value: str, option: str) -> str:
    """Application, stream and run names: the characters Kinesis allows in stream names."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigurationError(
            f"{option} {value!r} is not valid: use 1-128 characters from A-Z a-z 0-9 _ . - "
            "(it is part of the lease table's keys)"
        )
    return value


def validate_table_name(value: str) -> str:
    if not isinstance(value, str) or not _TABLE_NAME.fullmatch(value):
        raise ConfigurationError(
            f"leaseTableName {value!r} is not a DynamoDB table name: use 3-255 characters from "
            "A-Z a-z 0-9 _ . -"
        )
    return value


def validate_worker_id(value: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 256 or not value.isprintable():
        raise ConfigurationError(f"worker id {value!r} must be 1-256 printable characters")
    return value


def default_table_name(application: str) -> str:
    """``leaseTableName`` when the user gives none: derived from ``applicationName``."""
    return f"kinesis-src-{validate_name(application, 'applicationName')}"


def lease_partition(application: str, stream: str) -> str:
    return f"lease#{application}#{stream}"


# -- values -----------------------------------------------------------------------


class CheckpointKind(str, enum.Enum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    SEQUENCE_NUMBER = "SEQUENCE_NUMBER"
    SHARD_END = "SHARD_END"


_SENTINELS = {k.value: k for k in CheckpointKind if k is not CheckpointKind.SEQUENCE_NUMBER}


@dataclass(frozen=True)
class Checkpoint:
    """How far a shard has been processed.

    A sequence checkpoint names the last record processed (the KCL's
    meaning): processing resumes *after* it. The sentinels say where to
    start a shard nobody has processed yet, or that it is finished.
    ``sub_sequence_number`` > 0 marks a partly processed aggregated record.
    """

    kind: CheckpointKind
    sequence_number: str | None = None
    sub_sequence_number: int = 0
    timestamp: datetime | None = None

    def __post_init__(self) -> None:
        is_seq = self.kind is CheckpointKind.SEQUENCE_NUMBER
        if is_seq != (self.sequence_number is not None):
            raise InvalidPositionError(f"{self.kind.value} checkpoint with sequence number {self.sequence_number!r}")
        if is_seq:
            validate_sequence_number(self.sequence_number)  # type: ignore[arg-type]
        is_ts = self.kind is CheckpointKind.AT_TIMESTAMP
        if is_ts != (self.timestamp is not None):
            raise InvalidPositionError(f"{self.kind.value} checkpoint with timestamp {self.timestamp!r}")
        if self.sub_sequence_number < 0 or (self.sub_sequence_number and not is_seq):
            raise InvalidPositionError(
                f"sub-sequence number {self.sub_sequence_number} needs a sequence-number checkpoint"
            )

    @classmethod
    def trim_horizon(cls) -> Checkpoint:
        return cls(CheckpointKind.TRIM_HORIZON)

    @classmethod
    def latest(cls) -> Checkpoint:
        return cls(CheckpointKind.LATEST)

    @classmethod
    def at_timestamp(cls, when: datetime | str | float) -> Checkpoint:
        return cls(CheckpointKind.AT_TIMESTAMP, timestamp=parse_timestamp(when))

    @classmethod
    def sequence(cls, sequence_number: str, sub_sequence_number: int = 0) -> Checkpoint:
        return cls(CheckpointKind.SEQUENCE_NUMBER, sequence_number, sub_sequence_number)

    @classmethod
    def shard_end(cls) -> Checkpoint:
        return cls(CheckpointKind.SHARD_END)

    @classmethod
    def from_position(cls, position: Position) -> Checkpoint:
        """The checkpoint that makes a new owner start at ``position``."""
        if position.kind is PositionKind.AFTER_SEQUENCE_NUMBER:
            return cls.sequence(position.sequence_number)  # type: ignore[arg-type]
        if position.kind is PositionKind.AT_SEQUENCE_NUMBER:
            raise InvalidPositionError(
                f"cannot checkpoint {position}: a checkpoint names the last record processed; "
                "checkpoint that record's sequence number (after_sequence) instead"
            )
        if position.kind is PositionKind.AT_TIMESTAMP:
            return cls.at_timestamp(position.timestamp)  # type: ignore[arg-type]
        return cls(CheckpointKind(position.kind.value))

    @property
    def is_shard_end(self) -> bool:
        return self.kind is CheckpointKind.SHARD_END

    @property
    def started(self) -> bool:
        """True once a record was checkpointed or the shard finished."""
        return self.kind in (CheckpointKind.SEQUENCE_NUMBER, CheckpointKind.SHARD_END)

    def resume_position(self) -> Position | None:
        """Where the next owner starts reading; None for a finished shard.

        A partly processed aggregated record resumes AT its sequence number
        and the caller skips sub-records up to ``sub_sequence_number``.
        """
        if self.kind is CheckpointKind.SHARD_END:
            return None
        if self.kind is CheckpointKind.SEQUENCE_NUMBER:
            if self.sub_sequence_number:
                return Position.at_sequence(self.sequence_number)  # type: ignore[arg-type]
            return Position.after_sequence(self.sequence_number)  # type: ignore[arg-type]
        if self.kind is CheckpointKind.AT_TIMESTAMP:
            return Position.at_timestamp(self.timestamp)  # type: ignore[arg-type]
        return Position(PositionKind(self.kind.value))

    def __str__(self) -> str:
        if self.sequence_number is not None:
            suffix = f"/{self.sub_sequence_number}" if self.sub_sequence_number else ""
            return f"{self.sequence_number}{suffix}"
        if self.timestamp is not None:
            return f"AT_TIMESTAMP {format_timestamp(self.timestamp)}"
        return self.kind.value


@dataclass(frozen=True)
class Lease:
    """One shard's lease, as stored.

    ``counter`` is the fencing token: every change of ownership (take,
    steal, release, SHARD_END) increments it, and every write by the holder
    is conditional on (owner, counter), so a holder that was replaced can no
    longer write. ``last_updated_ms`` is wall-clock time for humans; expiry
    never reads it (see :mod:`kinesis_src.leases`).
    """

    shard_id: str
    checkpoint: Checkpoint
    hash_range: HashRange
    counter: int = 0
    owner: str | None = None
    parent_shard_ids: tuple[str, ...] = ()
    child_shard_ids: tuple[str, ...] = ()
    owner_switches_since_checkpoint: int = 0
    last_updated_ms: int = 0

    @property
    def is_shard_end(self) -> bool:
        return self.checkpoint.is_shard_end

    @classmethod
    def for_shard(cls, shard: Shard, checkpoint: Checkpoint) -> Lease:
        """A new, unowned lease for a shard from a ListShards listing."""
        return cls(shard.shard_id, checkpoint, shard.hash_range, parent_shard_ids=_parent_order(shard.parents))

    @classmethod
    def for_child(cls, child: ChildShard) -> Lease:
        """A new lease for a child named by GetRecords' ChildShards: starts at TRIM_HORIZON.

        Parents are kept in shard-id order: ChildShards and ListShards name a
        merge child's two parents in different orders, and whichever creates
        the lease first must write the same item.
        """
        return cls(
            child.shard_id,
            Checkpoint.trim_horizon(),
            HashRange(child.starting_hash_key, child.ending_hash_key),
            parent_shard_ids=_parent_order(child.parent_shards),
        )

    def describe(self) -> str:
        owner = self.owner or "nobody"
        return f"lease on {self.shard_id} (owner {owner}, counter {self.counter}, checkpoint {self.checkpoint})"


def _parent_order(parents: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(parents, key=shard_sort_key))


@dataclass(frozen=True)
class WorkerHeartbeat:
    """A worker's liveness item: one write per renewal interval keeps all its leases.

    ``session`` is random per process, so a restarted process with the same
    worker id, or two processes wrongly sharing one, are told apart.
    """

    worker_id: str
    session: str
    heartbeat: int
    last_updated_ms: int = 0


class HeartbeatStatus(str, enum.Enum):
    RENEWED = "renewed"
    DECLARED_DEAD = "declared_dead"  # another worker saw it stale and deleted it
    REPLACED = "replaced"  # another process registered the same worker id


@dataclass(frozen=True)
class TableView:
    """Everything one Query returns for an application+stream."""

    leases: Mapping[str, Lease]
    workers: Mapping[str, WorkerHeartbeat]


@dataclass(frozen=True)
class ShardEndResult:
    lease: Lease
    created_children: tuple[str, ...]
    existing_children: tuple[str, ...]


# -- the table ----------------------------------------------------------------------


@dataclass
class LeaseTable:
    """One application's leases on one stream, in a (possibly shared) DynamoDB table."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    now_ms: Callable[[], int] = field(default=_wall_ms, repr=False)

    def __post_init__(self) -> None:
        validate_table_name(self.table_name)
        validate_name(self.application, "applicationName")
        validate_name(self.stream, "streamName")
        self.partition = lease_partition(self.application, self.stream)
        self.codec = LeaseCodec(self.table_name)

    # -- table management ----------------------------------------------------------

    def ensure_table(self, create: bool = True, timeout_s: float = 120.0) -> bool:
        """Make sure the table exists with the lease key schema; returns True if created now."""
        if create:
            description, created = self.dynamodb.create_table_if_missing(
                self.table_name, HASH_KEY, RANGE_KEY, TTL_ATTRIBUTE, timeout_s
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
        if created:
            log.info("created lease table %r at %s", self.table_name, self.dynamodb.endpoint)
        return created

    # -- reads ------------------------------------------------------------------------

    def scan(self) -> TableView:
        """Leases and heartbeats of this application+stream: one consistent Query."""
        leases: dict[str, Lease] = {}
        workers: dict[str, WorkerHeartbeat] = {}
        for item in self.dynamodb.query(self.table_name, HASH_KEY, self.partition):
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

    def list_leases(self) -> list[Lease]:
        items = self.dynamodb.query(self.table_name, HASH_KEY, self.partition, RANGE_KEY, LEASE_PREFIX)
        return [self.codec.lease(item) for item in items]

    def get_lease(self, shard_id: str) -> Lease | None:
        item = self.dynamodb.get_item(self.table_name, self._lease_key(shard_id))
        return None if item is None else self.codec.lease(item)

    # -- lease writes -----------------------------------------------------------------

    def create_lease(self, lease: Lease) -> bool:
        """Put-if-absent; False when a lease for the shard already exists (idempotent create)."""
        item = self.codec.lease_item(self.partition, replace(lease, last_updated_ms=self.now_ms()))
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

    def checkpoint(self, lease: Lease, checkpoint: Checkpoint) -> Lease:
        """Record progress; only the holder at the lease's counter may. Raises LeaseLostError."""
        if checkpoint.is_shard_end:
            raise InvalidPositionError("SHARD_END is recorded with mark_shard_end(), which also creates the children")
        update, values = self._checkpoint_update(checkpoint)
        result = self._update_held(lease, update + ", #switches = :zero, #updated = :now", values=values)
        return self._lease_or_lost(lease, result, f"checkpoint {checkpoint}")

    def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        """Create the child leases (put-if-absent), then mark the parent SHARD_END and unowned.

        Children first: if the worker dies between the two writes, the next
        owner re-reads the parent to its end and repeats this idempotently;
        the children are not assignable until the parent is SHARD_END. A
        merge child is created by whichever parent ends first.
        """
        created, existing = [], []
        for child in children:
            (created if self.create_lease(child) else existing).append(child.shard_id)
        ids = tuple(c.shard_id for c in children) or lease.child_shard_ids
        result = self._update_held(
            lease,
            "SET #cp = :end, #sub = :zero, #children = :children, #counter = :next, #switches = :zero, "
            "#updated = :now REMOVE #owner, #cpts",
            values={":end": _s(CheckpointKind.SHARD_END.value), ":children": _list(ids)},
        )
        ended = self._lease_or_lost(lease, result, "SHARD_END")
        return ShardEndResult(ended, tuple(created), tuple(existing))

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
        names = {
            "#owner": LEASE_OWNER, "#counter": LEASE_COUNTER, "#switches": OWNER_SWITCHES,
            "#updated": LAST_UPDATED, "#cp": CHECKPOINT, "#sub": CHECKPOINT_SUB_SEQUENCE,
            "#cpts": CHECKPOINT_TIMESTAMP, "#children": CHILD_SHARD_IDS,
        }
        all_values: dict[str, Any] = {
            ":cur": _n(lease.counter), ":now": _n(self.now_ms()), ":zero": _n(0), ":next": _n(lease.counter + 1)
        }
        all_values.update(values or {})
        if lease.owner is None:
            condition = "#counter = :cur AND attribute_not_exists(#owner)"
        else:
            condition = "#counter = :cur AND #owner = :owner"
            all_values[":owner"] = _s(lease.owner)
        used = set(_TOKEN.findall(update + " " + condition))
        return self.dynamodb.update_item(
            self.table_name,
            self._lease_key(lease.shard_id),
            update,
            condition,
            names={k: v for k, v in names.items() if k in used},
            values={k: v for k, v in all_values.items() if k in used},
        )

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
        return {HASH_KEY: _s(self.partition), RANGE_KEY: _s(LEASE_PREFIX + shard_id)}

    # -- worker heartbeats --------------------------------------------------------------

    def register_worker(self, worker_id: str) -> WorkerHeartbeat:
        """Write this process's heartbeat item (a new session); a previous process with the id loses."""
        worker = WorkerHeartbeat(validate_worker_id(worker_id), uuid.uuid4().hex[:12], 0, self.now_ms())
        self.dynamodb.put_item(self.table_name, self.codec.worker_item(self.partition, worker))
        return worker

    def heartbeat(self, worker: WorkerHeartbeat) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        """Increment the heartbeat, conditional on our session and counter.

        ``heartbeat IN (current, next)`` makes a retry of a write that did
        land succeed instead of looking like someone else's write.
        """
        nxt = replace(worker, heartbeat=worker.heartbeat + 1, last_updated_ms=self.now_ms())
        result = self.dynamodb.update_item(
            self.table_name,
            self._worker_key(worker.worker_id),
            "SET #hb = :next, #updated = :now, #ttl = :ttl",
            "#session = :session AND (#hb = :cur OR #hb = :next)",
            names={"#hb": HEARTBEAT, "#updated": LAST_UPDATED, "#ttl": TTL_ATTRIBUTE, "#session": SESSION},
            values={
                ":next": _n(nxt.heartbeat), ":cur": _n(worker.heartbeat), ":now": _n(nxt.last_updated_ms),
                ":ttl": _n(nxt.last_updated_ms // 1000 + HEARTBEAT_TTL_S), ":session": _s(worker.session),
            },
        )
        if result.ok:
            return HeartbeatStatus.RENEWED, nxt
        if result.item is not None and self.codec.worker(result.item).session != worker.session:
            return HeartbeatStatus.REPLACED, worker
        return HeartbeatStatus.DECLARED_DEAD, worker

    def declare_worker_dead(self, worker: WorkerHeartbeat) -> bool:
        """Delete a heartbeat observed unchanged for the failover time, if still unchanged."""
        return self._delete_worker(worker, check_heartbeat=True)

    def deregister_worker(self, worker: WorkerHeartbeat) -> bool:
        return self._delete_worker(worker, check_heartbeat=False)

    def _delete_worker(self, worker: WorkerHeartbeat, check_heartbeat: bool) -> bool:
        condition = "#session = :session"
        names = {"#session": SESSION}
        values = {":session": _s(worker.session)}
        if check_heartbeat:
            condition += " AND #hb = :hb"
            names["#hb"] = HEARTBEAT
            values[":hb"] = _n(worker.heartbeat)
        result = self.dynamodb.delete_item(
            self.table_name, self._worker_key(worker.worker_id), condition, names=names, values=values
        )
        return result.ok

    def _worker_key(self, worker_id: str) -> Item:
        return {HASH_KEY: _s(self.partition), RANGE_KEY: _s(WORKER_PREFIX + worker_id)}


# -- serializer ---------------------------------------------------------------------


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _list(values: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    return {"L": [_s(v) for v in values]}


_TYPE_NAMES = {"S": "a string (S)", "N": "a number (N)", "L": "a list (L)", "BOOL": "a boolean (BOOL)"}


@dataclass(frozen=True)
class LeaseCodec:
    """Item <-> value for one table; every read checks presence and DynamoDB type."""

    table: str

    # -- writing --------------------------------------------------------------------

    def lease_item(self, partition: str, lease: Lease) -> Item:
        item: Item = {
            HASH_KEY: _s(partition),
            RANGE_KEY: _s(LEASE_PREFIX + lease.shard_id),
            SHARD_ID: _s(lease.shard_id),
            LEASE_COUNTER: _n(lease.counter),
            CHECKPOINT: _s(self.checkpoint_text(lease.checkpoint)),
            CHECKPOINT_SUB_SEQUENCE: _n(lease.checkpoint.sub_sequence_number),
            PARENT_SHARD_IDS: _list(lease.parent_shard_ids),
            CHILD_SHARD_IDS: _list(lease.child_shard_ids),
            STARTING_HASH_KEY: _s(str(lease.hash_range.start)),
            ENDING_HASH_KEY: _s(str(lease.hash_range.end)),
            OWNER_SWITCHES: _n(lease.owner_switches_since_checkpoint),
            LAST_UPDATED: _n(lease.last_updated_ms),
        }
        if lease.owner is not None:
            item[LEASE_OWNER] = _s(lease.owner)
        if lease.checkpoint.timestamp is not None:
            item[CHECKPOINT_TIMESTAMP] = _s(format_timestamp(lease.checkpoint.timestamp))
        return item

    @staticmethod
    def checkpoint_text(checkpoint: Checkpoint) -> str:
        return checkpoint.sequence_number or checkpoint.kind.value

    def worker_item(self, partition: str, worker: WorkerHeartbeat) -> Item:
        return {
            HASH_KEY: _s(partition),
            RANGE_KEY: _s(WORKER_PREFIX + worker.worker_id),
            WORKER_ID: _s(worker.worker_id),
            SESSION: _s(worker.session),
            HEARTBEAT: _n(worker.heartbeat),
            LAST_UPDATED: _n(worker.last_updated_ms),
            TTL_ATTRIBUTE: _n(worker.last_updated_ms // 1000 + HEARTBEAT_TTL_S),
        }

    # -- reading --------------------------------------------------------------------

    def lease(self, item: Item) -> Lease:
        shard_id = self.string(item, SHARD_ID)
        if self.key_part(item, RANGE_KEY) != LEASE_PREFIX + shard_id:
            raise self.corrupt(item, SHARD_ID, "the shard id in the sort key", f"is {shard_id!r}")
        owner = self.string(item, LEASE_OWNER, optional=True)
        if LEASE_OWNER in item and not owner:
            raise self.corrupt(item, LEASE_OWNER, "a worker id, or no attribute when unowned", "is empty")
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
        )

    def worker(self, item: Item) -> WorkerHeartbeat:
        worker_id = self.string(item, WORKER_ID)
        if self.key_part(item, RANGE_KEY) != WORKER_PREFIX + worker_id:
            raise self.corrupt(item, WORKER_ID, "the worker id in the sort key", f"is {worker_id!r}")
        return WorkerHeartbeat(
            worker_id=worker_id,
            session=self.string(item, SESSION),
            heartbeat=self.number(item, HEARTBEAT),
            last_updated_ms=self.number(item, LAST_UPDATED),
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

    def key_part(self, item: Item, attribute: str) -> str:
        return self.string(item, attribute)

    def string(self, item: Item, attribute: str, optional: bool = False) -> str:
        value = self._typed(item, attribute, "S", optional)
        return "" if value is None else value

    def number(self, item: Item, attribute: str) -> int:
        text = self._typed(item, attribute, "N", False)
        try:
            return int(text)
        except (TypeError, ValueError):
            raise self.corrupt(item, attribute, "an integer", f"is {text!r}") from None

    def strings(self, item: Item, attribute: str) -> tuple[str, ...]:
        values = self._typed(item, attribute, "L", False)
        out = []
        for i, element in enumerate(values):
            if not isinstance(element, Mapping) or set(element) != {"S"} or not element["S"]:
                raise self.corrupt(item, attribute, "a list of non-empty strings", f"has element {i} = {element!r}")
            out.append(element["S"])
        return tuple(out)

    def boolean(self, item: Item, attribute: str) -> bool:
        return bool(self._typed(item, attribute, "BOOL", False))

    def _typed(self, item: Item, attribute: str, type_code: str, optional: bool) -> Any:
        raw = item.get(attribute)
        if raw is None:
            if optional:
                return None
            raise self.corrupt(item, attribute, _TYPE_NAMES[type_code], "is missing")
        if not isinstance(raw, Mapping) or len(raw) != 1 or type_code not in raw:
            found = ", ".join(raw) if isinstance(raw, Mapping) else type(raw).__name__
            raise self.corrupt(item, attribute, _TYPE_NAMES[type_code], f"has type {found} (value {_short(raw)})")
        return raw[type_code]

    def corrupt(self, item: Item, attribute: str, expected: str, found: str) -> CorruptLeaseError:
        key = {name: _key_text(item.get(name)) for name in (HASH_KEY, RANGE_KEY)}
        return CorruptLeaseError(self.table, key, attribute, expected, found)


def _key_text(raw: Any) -> str:
    if isinstance(raw, Mapping) and isinstance(raw.get("S"), str):
        return raw["S"]
    return f"<{_short(raw)}>"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
