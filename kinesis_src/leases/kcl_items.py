"""KCL 2.x/3.x lease-table items, read (never written): leases, the items to skip, checkpoints.

Reads what KCL's ``DynamoDBLeaseSerializer`` writes and skips the other items KCL 3.x keeps there.
The attribute table: docs/migration.md, "What is read, and what it becomes"."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Mapping

from lineage import HashRange, shard_sort_key

from ..aws.dynamodb import Item
from ..errors import ConfigurationError, KinesisSourceError
from .model import Checkpoint

LEASE_KEY = "leaseKey"
KCL_KEY_SCHEMA = ((LEASE_KEY, "HASH", "S"),)
LEADER_LOCK_KEY = "Leader"
LEASE_ENTITY = "LEASE"
ENTITY_TYPE = "entityType"
_STREAM_IDENTIFIER = re.compile(r"(?P<account>[0-9]+):(?P<name>[^:]+):(?P<epoch>[0-9]+)")


class KclImportError(ConfigurationError):
    """The KCL table cannot be imported as asked; the message names the thing and the fix."""


class NotAKclLeaseTableError(KclImportError):
    """The table's key schema or items are not those of a KCL lease table."""


class KclApplicationRunningError(KinesisSourceError):
    """The KCL table's leases changed while the import watched them: a KCL worker still runs."""


class KclStreamMismatchError(KclImportError):
    """The KCL table's leases belong to another stream than the one named."""


class ImportTargetInUseError(KclImportError):
    """The application already has other leases on the stream in the target lease table."""


class KclCheckpointKind(str, enum.Enum):
    """What a KCL ``checkpoint`` attribute says."""

    SEQUENCE_NUMBER = "SEQUENCE_NUMBER"
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    SHARD_END = "SHARD_END"


UNSTARTED = (KclCheckpointKind.LATEST, KclCheckpointKind.AT_TIMESTAMP)


@dataclass(frozen=True)
class StreamIdentifier:
    """A multi-stream KCL application's stream: ``<account>:<name>:<creation epoch seconds>``."""

    account: str
    name: str
    creation_epoch: int

    @classmethod
    def parse(cls, text: str) -> StreamIdentifier | None:
        match = _STREAM_IDENTIFIER.fullmatch(text)
        if match is None:
            return None
        return cls(match["account"], match["name"], int(match["epoch"]))

    def __str__(self) -> str:
        return f"{self.account}:{self.name}:{self.creation_epoch}"


@dataclass(frozen=True)
class KclLease:
    """One KCL lease item, as read."""

    lease_key: str
    shard_id: str
    counter: int
    owner: str | None
    checkpoint: str
    sub_sequence_number: int
    parent_shard_ids: tuple[str, ...] = ()
    child_shard_ids: tuple[str, ...] = ()
    hash_range: HashRange | None = None
    pending_checkpoint: str | None = None
    checkpoint_owner: str | None = None
    stream: StreamIdentifier | None = None  # multi-stream tables only

    @property
    def kind(self) -> KclCheckpointKind:
        if self.checkpoint.isdigit():
            return KclCheckpointKind.SEQUENCE_NUMBER
        return KclCheckpointKind(self.checkpoint)

    def activity(self) -> tuple[Any, ...]:
        """What a running KCL worker changes: renewals move the counter, processing the checkpoint."""
        return (self.counter, self.owner, self.checkpoint, self.sub_sequence_number, self.checkpoint_owner)


@dataclass(frozen=True)
class SkippedItem:
    """A non-lease item of a KCL table (worker metrics, coordinator state, the leader lock)."""

    key: str
    what: str


def checkpoint_for(lease: KclLease, unstarted: Checkpoint) -> Checkpoint:
    """Our checkpoint for a KCL lease's: the same sequence checkpoint, SHARD_END or TRIM_HORIZON.
    ``LATEST`` and ``AT_TIMESTAMP`` mean nothing was processed, and the table does not say when or
    which timestamp, so ``unstarted`` decides."""
    kind = lease.kind
    if kind is KclCheckpointKind.SEQUENCE_NUMBER:
        return Checkpoint.sequence(lease.checkpoint, lease.sub_sequence_number)
    if kind is KclCheckpointKind.SHARD_END:
        return Checkpoint.shard_end()
    if kind is KclCheckpointKind.TRIM_HORIZON:
        return Checkpoint.trim_horizon()
    return unstarted


class KclItemReader:
    """Item -> :class:`KclLease` or :class:`SkippedItem`; a malformed lease names the table, key and attribute."""

    def __init__(self, table: str) -> None:
        self.table = table

    def read(self, item: Item) -> KclLease | SkippedItem:
        key = self._string(item, LEASE_KEY, "?")
        entity = self._optional(item, ENTITY_TYPE)
        if entity is not None and entity != LEASE_ENTITY:
            return SkippedItem(key, f"KCL {entity} item")
        if key == LEADER_LOCK_KEY:
            return SkippedItem(key, "KCL leader lock")
        return self._lease(key, item)

    def _lease(self, key: str, item: Item) -> KclLease:
        stream_text = self._optional(item, "streamName")
        stream = None
        if stream_text is not None:
            stream = StreamIdentifier.parse(stream_text)
            if stream is None:
                raise self._bad(key, "streamName", "<account>:<stream>:<creation epoch>", stream_text)
        shard_id = self._optional(item, "shardId") or key.rsplit(":", 1)[-1]
        lease = KclLease(
            lease_key=key,
            shard_id=shard_id,
            counter=self._number(item, key, "leaseCounter"),
            owner=self._optional(item, "leaseOwner"),
            checkpoint=self._string(item, "checkpoint", key),
            sub_sequence_number=self._number(item, key, "checkpointSubSequenceNumber", default=0),
            parent_shard_ids=self._string_set(item, key, "parentShardId"),
            child_shard_ids=self._string_set(item, key, "childShardIds") or self._string_set(item, key, "childShardId"),
            hash_range=self._hash_range(item, key),
            pending_checkpoint=self._optional(item, "pendingCheckpoint"),
            checkpoint_owner=self._optional(item, "checkpointOwner"),
            stream=stream,
        )
        try:
            lease.kind  # noqa: B018  (validates the checkpoint text)
        except ValueError:
            raise self._bad(key, "checkpoint", "a sequence number or TRIM_HORIZON, LATEST, AT_TIMESTAMP, "
                            "SHARD_END", lease.checkpoint) from None
        return lease

    def _hash_range(self, item: Item, key: str) -> HashRange | None:
        start, end = self._optional(item, "startingHashKey"), self._optional(item, "endingHashKey")
        if not start or not end:
            return None
        if not (start.isdigit() and end.isdigit()):
            raise self._bad(key, "startingHashKey", "decimal hash keys", f"{start}-{end}")
        try:
            return HashRange(int(start), int(end))
        except ValueError:
            raise self._bad(key, "endingHashKey", "a hash key range start <= end", f"{start}-{end}") from None

    def _optional(self, item: Item, attribute: str) -> str | None:
        raw = item.get(attribute)
        return raw.get("S") if isinstance(raw, Mapping) else None

    def _string(self, item: Item, attribute: str, key: str) -> str:
        value = self._optional(item, attribute)
        if not value:
            raise self._bad(key, attribute, "a string (S)", "missing" if attribute not in item else item[attribute])
        return value

    def _number(self, item: Item, key: str, attribute: str, default: int | None = None) -> int:
        raw = item.get(attribute)
        if raw is None and default is not None:
            return default
        text = raw.get("N") if isinstance(raw, Mapping) else None
        if text is None or not text.lstrip("-").isdigit():
            raise self._bad(key, attribute, "an integer (N)", "missing" if raw is None else raw)
        return int(text)

    def _string_set(self, item: Item, key: str, attribute: str) -> tuple[str, ...]:
        raw = item.get(attribute)
        if raw is None:
            return ()
        values = raw.get("SS", raw.get("L")) if isinstance(raw, Mapping) else None
        if not isinstance(values, list):
            raise self._bad(key, attribute, "a string set (SS)", raw)
        out = [v.get("S") if isinstance(v, Mapping) else v for v in values]
        if not all(isinstance(v, str) and v for v in out):
            raise self._bad(key, attribute, "a string set (SS)", raw)
        return tuple(sorted(out, key=shard_sort_key))

    def _bad(self, key: str, attribute: str, expected: str, found: Any) -> NotAKclLeaseTableError:
        text = repr(found)
        text = text if len(text) <= 80 else text[:77] + "..."
        return NotAKclLeaseTableError(
            f"item leaseKey={key!r} of DynamoDB table {self.table!r} is not a KCL lease: its attribute "
            f"{attribute!r} should be {expected}, but is {text}. Check --kcl-table: it must be a KCL 2.x/3.x "
            "application's lease table (named after its applicationName)."
        )
