"""What the Spark driver knows of a stream between batches, as values: frontier and batch ends."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

from ..positions import Position

TRIMMED_STOP = "trimmed"  # a task found its shard gone (failOnDataLoss=false): recorded as ended, 0 records


class ShardStatus(str, enum.Enum):
    PENDING = "pending"  # may have unread records: stopped on a limit, left out by the read limit, never ran, or new
    IDLE = "idle"  # last read reached the tip; needs a cheap probe before it is read again
    FINISHED = "finished"  # read up to the cut of the AvailableNow run that planned it (see for_trigger)


@dataclass(frozen=True)
class BatchEnd:
    """Where one shard's read in a batch ended, as recorded by the task that won the write."""

    next_position: Position
    record_count: int
    shard_end: bool
    stop_reason: str
    millis_behind_latest: int | None = None
    # what the read cost, for the query progress only (planning ignores them): record data bytes, and the
    # retries the task's read made, throttles among them (kinesis_src.spark.task_figures)
    byte_count: int = 0
    throttles: int = 0
    retries: int = 0


@dataclass(frozen=True)
class Frontier:
    """Every ready, undrained shard's next read start and status, and the shards drained so far."""

    positions: Mapping[str, Position]
    status: Mapping[str, ShardStatus]
    drained: frozenset[str]
