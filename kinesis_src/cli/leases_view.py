"""``kinesis-src leases``: one application's lease table, as rows for a terminal, plain text or JSON.

Pure. "stale" is judged by wall clock: a hint that a worker stopped, not what frees its leases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lineage import shard_sort_key

from ..leases.model import Lease, TableView
from .lineage_view import format_age


@dataclass(frozen=True)
class LeaseRow:
    shard_id: str
    owner: str | None
    counter: int
    checkpoint: str
    lag_ms: int | None  # None: not measured, or the shard is finished
    parents: str  # "-", "done", or "waiting: <ids>"
    held_past_end: bool  # SHARD_END checkpointed, still owned (the owner has not let go yet)


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    heartbeat: int
    age_s: float
    stale: bool
    leases: int


def lease_rows(view: TableView, lag_ms: Mapping[str, int | None]) -> list[LeaseRow]:
    return [_lease_row(view.leases, lease, lag_ms.get(lease.shard_id)) for lease in _ordered(view.leases)]


def worker_rows(view: TableView, now_ms: int, failover_s: float) -> list[WorkerRow]:
    held: dict[str, int] = {}
    for lease in view.leases.values():
        if lease.owner is not None:
            held[lease.owner] = held.get(lease.owner, 0) + 1
    rows = []
    for wid in sorted(view.workers):
        w = view.workers[wid]
        age = max(0.0, (now_ms - w.last_updated_ms) / 1000)
        rows.append(WorkerRow(wid, w.heartbeat, age, age > failover_s, held.get(wid, 0)))
    return rows


def _ordered(leases: Mapping[str, Lease]) -> list[Lease]:
    return [leases[s] for s in sorted(leases, key=shard_sort_key)]


def _lease_row(leases: Mapping[str, Lease], lease: Lease, lag: int | None) -> LeaseRow:
    return LeaseRow(
        shard_id=lease.shard_id, owner=lease.owner, counter=lease.counter, checkpoint=str(lease.checkpoint),
        lag_ms=None if lease.is_shard_end else lag, parents=_parent_state(leases, lease),
        held_past_end=lease.is_shard_end and lease.owner is not None,
    )


def _parent_state(leases: Mapping[str, Lease], lease: Lease) -> str:
    """A lease is assignable once every parent that still has a lease reached SHARD_END."""
    if not lease.parent_shard_ids:
        return "-"
    waiting = [p for p in lease.parent_shard_ids if p in leases and not leases[p].is_shard_end]
    return f"waiting: {', '.join(waiting)}" if waiting else "done"


# -- rendering ----------------------------------------------------------------------------------------

LEASE_HEADERS = ["shard", "owner", "counter", "checkpoint", "lag", "parents", "note"]
WORKER_HEADERS = ["worker", "heartbeat", "age", "state", "leases"]


def lease_cells(row: LeaseRow) -> list[str]:
    lag = "-" if row.lag_ms is None else format_age(row.lag_ms / 1000)
    note = "held past SHARD_END" if row.held_past_end else ""
    return [row.shard_id, row.owner or "-", str(row.counter), row.checkpoint, lag, row.parents, note]


def worker_cells(row: WorkerRow) -> list[str]:
    return [row.worker_id, str(row.heartbeat), format_age(row.age_s), "stale" if row.stale else "live", str(row.leases)]


def summary_line(table: str, application: str, stream: str, leases: Sequence[LeaseRow], workers: Sequence[WorkerRow]) -> str:
    owned = sum(1 for r in leases if r.owner)
    finished = sum(1 for r in leases if r.checkpoint == "SHARD_END")
    return (f"table {table}, application {application}, stream {stream}: {len(leases)} leases "
            f"({owned} owned, {finished} finished), {len(workers)} workers")


def as_json(table: str, application: str, stream: str, leases: Sequence[LeaseRow],
            workers: Sequence[WorkerRow]) -> dict:
    return {
        "table": table, "application": application, "stream": stream,
        "leases": [
            {"shardId": r.shard_id, "owner": r.owner, "counter": r.counter, "checkpoint": r.checkpoint,
             "lagMillis": r.lag_ms, "parents": r.parents, "heldPastShardEnd": r.held_past_end}
            for r in leases
        ],
        "workers": [
            {"workerId": w.worker_id, "heartbeat": w.heartbeat, "ageSeconds": round(w.age_s, 3),
             "stale": w.stale, "leases": w.leases}
            for w in workers
        ],
    }
