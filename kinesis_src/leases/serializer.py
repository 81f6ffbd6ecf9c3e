"""Every DynamoDB item layout of the lease table, and the only place attribute names appear.

One table serves any number of applications and streams. Every item is
namespaced by its partition key (hash key ``pk``, range key ``sk``, both S):

==========================================  ============================  ===========
pk                                          sk                            item
==========================================  ============================  ===========
``lease#<application>#<stream>[/<k>]``      ``shard#<shardId>``           shard lease (``/<k>``: spread, layout.py)
``lease#<application>#<stream>``            ``worker#<workerId>``         heartbeat
``layout#<application>#<stream>``           ``layout``                    over how many keys leases are spread
``claim#<application>#<stream>``            ``query``                     Spark query claim
``stream#<application>#<stream>``           ``identity``                  stream the leases belong to
``progress#<app>#<stream>#<run>#<batch>``   ``shard#<shardId>``           per-batch progress
``streams#<application>``                   ``streams``                   a consumer's last stream list
``ranges#<application>#<stream>``           ``claim#<workerId>``          sticky key-range claim
``processing#<application>#<stream>``       ``ordering``                  ordering mode of process()
==========================================  ============================  ===========

Leases and heartbeats of one application+stream share a partition (or, at
scale, P partitions recorded in the layout item), so one consistent Query per
key reads the whole coordination state (one request per 1 MB, about 3,000
leases). The Spark query claim is a heartbeat too, but under a
partition of its own: in the lease partition, a plain-Python consumer that
shares the applicationName would count it as a live worker and leave its
share of the leases unowned. Heartbeat and claim items carry ``ttl``
(garbage collection of items whose writer died; never used for expiry).

Application and stream names are restricted to ``[A-Za-z0-9_.-]`` (the
characters Kinesis allows in stream names), so ``#`` cannot make two
namespaces collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lineage import HashRange

from ..aws.dynamodb import Item
from ..errors import CorruptLeaseError, InvalidPositionError, KinesisSourceError
from ..identity import StreamIdentity
from ..positions import format_timestamp
from .model import (
    _SENTINELS,
    Checkpoint,
    CheckpointKind,
    Lease,
    Throughput,
    WorkerHeartbeat,
)

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
THROUGHPUT_RECORDS = "throughputRecords"  # records/s, written with a checkpoint (optional)
THROUGHPUT_BYTES = "throughputBytes"  # bytes/s
THROUGHPUT_AT = "throughputAt"  # epoch ms of the estimate
LEASE_CHANGES = "leaseChanges"  # heartbeats that announced an ownership change (optional: older items lack it)
LEASE_NOTIFY = "leaseNotify"  # workers the latest announcement concerns (optional: older items lack it)
STEAL_REQUEST = "stealRequestedBy"  # who asked the holder to release (optional; removed when the lease changes hands)

CLAIM_RANGE_KEY = "query"
IDENTITY_RANGE_KEY = "identity"
STREAM_ARN = "streamArn"
STREAM_CREATED = "streamCreated"

HEARTBEAT_TTL_S = 24 * 3600  # garbage collection of dead workers' items only; never used for expiry


def lease_partition(application: str, stream: str, scope: str = "") -> str:
    """The partition of one application's leases and heartbeats on a stream (``scope``: a key range's own set)."""
    return f"lease#{application}#{stream}#{scope}" if scope else f"lease#{application}#{stream}"


def lease_key(partition: str, shard_id: str) -> Item:
    return {HASH_KEY: _s(partition), RANGE_KEY: _s(LEASE_PREFIX + shard_id)}


def worker_key(partition: str, worker_id: str) -> Item:
    return {HASH_KEY: _s(partition), RANGE_KEY: _s(WORKER_PREFIX + worker_id)}


def claim_key(application: str, stream: str) -> Item:
    """The Spark query claim: its own partition, so no lease-partition Query ever returns it."""
    return {HASH_KEY: _s(f"claim#{application}#{stream}"), RANGE_KEY: _s(CLAIM_RANGE_KEY)}


def identity_key(application: str, stream: str) -> Item:
    """Which stream (ARN + creation time) an application's leases belong to: its own partition too."""
    return {HASH_KEY: _s(f"stream#{application}#{stream}"), RANGE_KEY: _s(IDENTITY_RANGE_KEY)}


def identity_item(key: Item, identity: StreamIdentity) -> Item:
    data = identity.to_dict()
    return {**key, STREAM_ARN: _s(data["arn"]), STREAM_CREATED: _s(data["created"])}


def throughput_values(throughput: Throughput, *names: str) -> dict[str, dict[str, str]]:
    """The three throughput attributes (or expression placeholders, in that order) of an estimate."""
    records, nbytes, at = names
    return {
        records: {"N": f"{throughput.records_per_s:.3f}"},
        nbytes: {"N": f"{throughput.bytes_per_s:.1f}"},
        at: _n(throughput.measured_ms),
    }


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _list(values: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    return {"L": [_s(v) for v in values]}


_ABSENT = object()
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
        if lease.throughput is not None:
            item.update(throughput_values(lease.throughput, THROUGHPUT_RECORDS, THROUGHPUT_BYTES, THROUGHPUT_AT))
        return item  # never a steal request: only LeaseTable.request_steal writes one, on a held lease

    @staticmethod
    def checkpoint_text(checkpoint: Checkpoint) -> str:
        return checkpoint.sequence_number or checkpoint.kind.value

    def heartbeat_item(self, key: Item, worker: WorkerHeartbeat, ttl_s: int) -> Item:
        """A worker heartbeat or the query claim, under ``key`` (:func:`worker_key`, :func:`claim_key`)."""
        return {
            **key,
            WORKER_ID: _s(worker.worker_id),
            SESSION: _s(worker.session),
            HEARTBEAT: _n(worker.heartbeat),
            LAST_UPDATED: _n(worker.last_updated_ms),
            TTL_ATTRIBUTE: _n(ttl_s),
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
        """Optional: items written before estimates existed, or never checkpointed with one, lack it."""
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

    def decimal(self, item: Item, attribute: str) -> float:
        text = self._typed(item, attribute, "N", False)
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise self.corrupt(item, attribute, "a number", f"is {text!r}") from None
        if not value >= 0:  # also NaN
            raise self.corrupt(item, attribute, "a rate >= 0", f"is {text!r}")
        return value

    def strings(self, item: Item, attribute: str) -> tuple[str, ...]:
        values = self._typed(item, attribute, "L", False)
        out = []
        for i, element in enumerate(values):
            if type(element) is dict and len(element) == 1 and type(element.get("S")) is str and element["S"]:
                out.append(element["S"])
                continue
            if not isinstance(element, Mapping) or set(element) != {"S"} or not element["S"]:
                raise self.corrupt(item, attribute, "a list of non-empty strings", f"has element {i} = {element!r}")
            out.append(element["S"])
        return tuple(out)

    def boolean(self, item: Item, attribute: str) -> bool:
        return bool(self._typed(item, attribute, "BOOL", False))

    def _typed(self, item: Item, attribute: str, type_code: str, optional: bool) -> Any:
        """The value of ``attribute`` if it has DynamoDB type ``type_code``; else a CorruptLeaseError.

        Called ~15 times per lease item, 10,000 items per read at scale: the
        common case (a dict of one key, as botocore parses it) is checked with
        ``type() is dict``; ``isinstance`` against ``typing.Mapping`` (an ABC
        check, ~60 % of decoding) runs only for anything else.
        """
        raw = item.get(attribute)
        if type(raw) is dict and len(raw) == 1:
            value = raw.get(type_code, _ABSENT)
            if value is not _ABSENT:
                return value
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
