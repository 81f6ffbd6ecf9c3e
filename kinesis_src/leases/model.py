"""Lease values: checkpoints, leases, worker heartbeats. No I/O, no attribute names.

Their DynamoDB layout is in :mod:`.schema`; the conditional writes in :mod:`.table`."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Sequence

from lineage import HashRange, Shard, shard_sort_key

from ..errors import InvalidPositionError
from ..positions import (
    Position,
    PositionKind,
    format_timestamp,
    parse_timestamp,
    validate_sequence_number,
)
from ..records import ChildShard


class CheckpointKind(str, enum.Enum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    SEQUENCE_NUMBER = "SEQUENCE_NUMBER"
    SHARD_END = "SHARD_END"


_SENTINELS = {k.value: k for k in CheckpointKind if k is not CheckpointKind.SEQUENCE_NUMBER}


@dataclass(frozen=True)
class Checkpoint:
    """How far a shard has been processed. A sequence checkpoint names the last (user) record
    processed, as the KCL's does: processing resumes after it. The sentinels say where an
    unprocessed shard starts, or that it is finished."""

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
            return cls.sequence(position.sequence_number, position.sub_sequence_number or 0)  # type: ignore[arg-type]
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
        """Where the next owner starts reading; None for a finished shard. Right after a sequence
        checkpoint's user record, inside a KPL aggregate too: the reader reads AT its sequence
        number and drops the user records up to the sub-sequence number."""
        if self.kind is CheckpointKind.SHARD_END:
            return None
        if self.kind is CheckpointKind.SEQUENCE_NUMBER:
            return Position.after_sequence(self.sequence_number, self.sub_sequence_number)  # type: ignore[arg-type]
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
class Throughput:
    """A shard's recent throughput as its holder measured it (:mod:`.throughput`). ``measured_ms``
    is the holder's wall clock: the balancer only uses it to ignore stale estimates, where a skew
    of seconds does not matter."""

    records_per_s: float
    bytes_per_s: float
    measured_ms: int


@dataclass(frozen=True)
class Lease:
    """One shard's lease, as stored (attributes: docs/leases.md, "Attributes"). ``counter`` is the
    fencing token: every change of ownership increments it, and every write by the holder is
    conditional on (owner, counter). ``last_updated_ms`` is for humans only."""

    shard_id: str
    checkpoint: Checkpoint
    hash_range: HashRange
    counter: int = 0
    owner: str | None = None
    parent_shard_ids: tuple[str, ...] = ()
    child_shard_ids: tuple[str, ...] = ()
    owner_switches_since_checkpoint: int = 0
    last_updated_ms: int = 0
    throughput: Throughput | None = None
    steal_requested_by: str | None = None

    @property
    def is_shard_end(self) -> bool:
        return self.checkpoint.is_shard_end

    @classmethod
    def for_shard(cls, shard: Shard, checkpoint: Checkpoint) -> Lease:
        """A new, unowned lease for a shard from a ListShards listing."""
        return cls(shard.shard_id, checkpoint, shard.hash_range, parent_shard_ids=_parent_order(shard.parents))

    @classmethod
    def for_child(cls, child: ChildShard) -> Lease:
        """A new lease for a child named by GetRecords' ChildShards, at TRIM_HORIZON. Parents in
        shard-id order: ChildShards and ListShards order a merge child's parents differently, and
        whichever creates the lease first must write the same item."""
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
    """A worker's liveness item: one write per renewal interval keeps all its leases. ``session``
    is random per process, so a restart or a shared worker id is told apart. ``changes``,
    ``notify``: its ownership announcements, and whom the latest names (:mod:`.view`)."""

    worker_id: str
    session: str
    heartbeat: int
    last_updated_ms: int = 0
    changes: int = 0
    notify: tuple[str, ...] = ()


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
    """The parent as marked SHARD_END, and which child leases this call created. A retry of a
    SHARD_END that had landed already reports every child as existing."""

    lease: Lease
    created_children: tuple[str, ...]
    existing_children: tuple[str, ...]

