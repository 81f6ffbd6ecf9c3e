"""``kinesis-src status``: how far behind and how busy each shard of a running application is.

Pure. Throughput is what each lease's holder wrote with its checkpoints, stale past a max age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lineage import shard_sort_key

from ..leases.model import Lease, TableView, WorkerHeartbeat
from ..leases.throughput import ESTIMATE_MAX_AGE_S
from .lineage_view import format_age


@dataclass(frozen=True)
class ShardStatus:
    shard_id: str
    owner: str | None
    records_per_s: float | None  # None: no estimate written yet
    bytes_per_s: float | None
    estimate_age_s: float | None
    lag_ms: int | None  # None: not measured, or the shard is finished
    finished: bool


def shard_statuses(view: TableView, lag_ms: Mapping[str, int | None], now_ms: int) -> list[ShardStatus]:
    return [_status(view.leases[s], lag_ms.get(s), now_ms) for s in sorted(view.leases, key=shard_sort_key)]


def _status(lease: Lease, lag: int | None, now_ms: int) -> ShardStatus:
    t = lease.throughput
    return ShardStatus(
        shard_id=lease.shard_id, owner=lease.owner,
        records_per_s=t.records_per_s if t else None, bytes_per_s=t.bytes_per_s if t else None,
        estimate_age_s=max(0.0, (now_ms - t.measured_ms) / 1000) if t else None,
        lag_ms=None if lease.is_shard_end else lag, finished=lease.is_shard_end,
    )


HEADERS = ["shard", "owner", "records/s", "KB/s", "measured", "lag"]


def cells(row: ShardStatus) -> list[str]:
    if row.finished:
        return [row.shard_id, row.owner or "-", "-", "-", "-", "finished"]
    rate = "-" if row.records_per_s is None else f"{row.records_per_s:,.1f}"
    kbs = "-" if row.bytes_per_s is None else f"{row.bytes_per_s / 1000:,.1f}"
    age = "-" if row.estimate_age_s is None else format_age(row.estimate_age_s) + " ago"
    if row.estimate_age_s is not None and row.estimate_age_s > ESTIMATE_MAX_AGE_S:
        age += " (stale)"
    lag = "-" if row.lag_ms is None else format_age(row.lag_ms / 1000)
    return [row.shard_id, row.owner or "-", rate, kbs, age, lag]


def summary(application: str, stream: str, rows: Sequence[ShardStatus], workers: Mapping[str, WorkerHeartbeat],
            claim: WorkerHeartbeat | None) -> str:
    reading = [r for r in rows if not r.finished]
    total = sum(r.records_per_s or 0.0 for r in reading)
    kbs = sum(r.bytes_per_s or 0.0 for r in reading) / 1000
    lags = [r.lag_ms for r in reading if r.lag_ms is not None]
    worst = format_age(max(lags) / 1000) if lags else "-"
    who = f"Spark query {claim.worker_id}" if claim else f"{len(workers)} worker{'' if len(workers) == 1 else 's'}"
    return (f"application {application}, stream {stream}: {who}, {len(reading)} shards reading, "
            f"{total:,.1f} records/s, {kbs:,.1f} KB/s, max lag {worst}")


def as_json(application: str, stream: str, rows: Sequence[ShardStatus], workers: Mapping[str, WorkerHeartbeat],
            claim: WorkerHeartbeat | None) -> dict:
    return {
        "application": application, "stream": stream,
        "sparkQuery": claim.worker_id if claim else None, "workers": sorted(workers),
        "shards": [
            {"shardId": r.shard_id, "owner": r.owner, "finished": r.finished, "recordsPerSecond": r.records_per_s,
             "bytesPerSecond": r.bytes_per_s,
             "measuredSecondsAgo": None if r.estimate_age_s is None else round(r.estimate_age_s, 3),
             "lagMillis": r.lag_ms}
            for r in rows
        ],
    }
