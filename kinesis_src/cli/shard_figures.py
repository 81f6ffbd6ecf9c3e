"""Per-shard figures for ``kinesis-src lineage``: the oldest retained record, and counts on request.

Each shard has its own :class:`~kinesis_src.retrieval.polling.ShardReader`, so its pacing holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from ..aws import KinesisClient
from ..positions import Position
from ..retrieval.polling import ShardReader, StopReason
from .lineage_view import ShardFigures

WORKERS = 16
_FINAL = frozenset({StopReason.SHARD_END, StopReason.CAUGHT_UP})


def shard_figures(
    kinesis: KinesisClient, stream: str, shard_ids: Sequence[str], count: bool,
    on_records: Callable[[int], None] = lambda n: None,
) -> dict[str, ShardFigures]:
    """Oldest record of every shard (one record read); with ``count``, every record read and summed."""
    measure = _count if count else _oldest
    if not shard_ids:
        return {}
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(shard_ids)), thread_name_prefix="kinesis-src-figures") as pool:
        results = pool.map(lambda sid: measure(ShardReader(kinesis, stream, sid, Position.trim_horizon()), on_records),
                           shard_ids)
        return dict(zip(shard_ids, results))


def _oldest(reader: ShardReader, on_records: Callable[[int], None]) -> ShardFigures:
    """Read until the first record, the tip or the shard's end (empty pages may come before data)."""
    read = reader.read(max_records=1, until_caught_up=True)
    arrival = next((t for page in read.pages for t in page.arrival_epoch[:1]), None)
    return ShardFigures(oldest_arrival=_at(arrival))


def _count(reader: ShardReader, on_records: Callable[[int], None]) -> ShardFigures:
    records = data_bytes = 0
    oldest = newest = None
    while True:
        read = reader.read(max_records=10_000, until_caught_up=True)
        for page in read.pages:
            if len(page):
                oldest = oldest if oldest is not None else page.arrival_epoch[0]
                newest = page.arrival_epoch[-1]
                records += len(page)
                data_bytes += page.byte_count
        on_records(read.record_count)
        if read.stop_reason in _FINAL:
            return ShardFigures(_at(oldest), records, data_bytes, _at(newest))


def _at(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)
