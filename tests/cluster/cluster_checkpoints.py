"""Reading a streaming query's checkpoint and sink from outside Spark: which batch is in flight, what it must hold.

Spark batch ``k`` reads the plan in ``checkpoint/offsets/k`` (our source's
offset: start position and record budget per shard) and is done when
``checkpoint/commits/k`` exists; its tasks record where each shard ended in
the lease table (:class:`~kinesis_src.leases.progress_store.ProgressStore`), first
writer wins. So what a batch must hold, on its first run or any re-run, is
every record from each shard's start up to its recorded end.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kinesis_src.aws import KinesisClient
from kinesis_src.errors import LeaseTableNotFoundError
from kinesis_src.leases.progress_store import ProgressStore, ShardProgress
from kinesis_src.records import Record
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.spark.offsets import Plan
from kinesis_src.testing import read_file_sink


@dataclass(frozen=True)
class BatchEnds:
    """Spark batch ``batch_id``: its plan and the end every read shard recorded."""

    batch_id: int
    plan: Plan
    recorded: dict[str, ShardProgress]

    def reads_records(self) -> bool:
        """Whether some shard's recorded end is past its start (the batch holds records)."""
        return any(self.recorded[sid].end != self.plan.shards[sid].start for sid in self.plan.read)


def _numbered(directory: Path) -> list[int]:
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit()) if directory.is_dir() else []


def committed(checkpoint: Path) -> int:
    """How many batches the query has committed."""
    return len(_numbered(checkpoint / "commits"))


def latest_batch(checkpoint: Path) -> int:
    """The newest batch whose offset is logged (-1 before the first)."""
    offsets = _numbered(checkpoint / "offsets")
    return offsets[-1] if offsets else -1


def plan_of(checkpoint: Path, batch_id: int) -> Plan | None:
    """The source's plan for Spark batch ``batch_id``, or None while its offset file is missing or half written."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        return Plan.from_offset(json.loads(lines[2]))  # version line, metadata line, then the source's offset
    except (OSError, IndexError, ValueError):
        return None


def uncommitted(checkpoint: Path) -> int | None:
    """The newest batch whose offset is logged and that is not committed, if any."""
    offsets = _numbered(checkpoint / "offsets")
    if offsets and not (checkpoint / "commits" / str(offsets[-1])).exists():
        return offsets[-1]
    return None


def recorded_ends(checkpoint: Path, store: ProgressStore, batch_id: int) -> BatchEnds | None:
    """Batch ``batch_id`` once every shard it reads has recorded its end (None before, or for a batch reading nothing)."""
    plan = plan_of(checkpoint, batch_id)
    if plan is None or not plan.read:
        return None
    try:
        recorded = store.read_batch(plan.run, plan.batch)
    except LeaseTableNotFoundError:  # the driver creates the table when it starts
        return None
    return BatchEnds(batch_id, plan, recorded) if set(recorded) >= set(plan.read) else None


def in_flight(checkpoint: Path, store: ProgressStore, after: int) -> BatchEnds | None:
    """An uncommitted batch later than ``after`` that read records, all ends recorded: one to kill the driver in."""
    batch_id = uncommitted(checkpoint)
    if batch_id is None or batch_id <= after:
        return None
    ends = recorded_ends(checkpoint, store, batch_id)
    return ends if ends is not None and ends.reads_records() else None


def expected_records(kinesis: KinesisClient, stream: str, ends: BatchEnds) -> set[tuple[str, str]]:
    """(shardId, sequenceNumber) of every record from each shard's start to its recorded end, read from Kinesis."""
    expected: set[tuple[str, str]] = set()
    for shard_id in ends.plan.read:
        start, end = ends.plan.shards[shard_id].start, ends.recorded[shard_id].end
        if end == start:
            continue
        reader = ShardReader(kinesis, stream, shard_id, start, fetch_interval_s=0)
        expected |= {(shard_id, r.sequence_number) for r in reader.read(end_sequence=end.sequence_number).records()}
    return expected


def sink_batches(data: Path) -> list[list[Record]]:
    """The file sink's committed batches, index = Spark batch id (checked: its log has no gaps)."""
    batches = read_file_sink(str(data))
    assert _numbered(data / "_spark_metadata") == list(range(len(batches))), "the file sink's log has gaps"
    return batches
