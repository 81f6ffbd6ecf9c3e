"""Read a whole stream once, parents before children, up to the current tip.

Each partition key's records come out in write order, across splits and merges (docs/batch.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator

from .aws import KinesisClient
from .discovery import ShardDiscovery
from .ordered_reads import DEFAULT_WORKERS, ShardDone, read_in_order
from .positions import Position
from .retrieval.polling import MIN_FETCH_INTERVAL_S, ShardRead, ShardReader, StopReason

log = logging.getLogger(__name__)

READ_AHEAD_BYTES = 128 * 2**20  # record data read ahead of the shard being handed out (plus a chunk per reader)


@dataclass
class DrainState:
    """Which shards are done: ``drained`` (SHARD_END), ``caught_up`` (tip), ``past_end`` (cut)."""

    drained: set[str] = field(default_factory=set)
    caught_up: set[str] = field(default_factory=set)
    past_end: set[str] = field(default_factory=set)
    records: int = 0

    def done(self, shard_id: str) -> bool:
        return shard_id in self.drained or shard_id in self.caught_up or shard_id in self.past_end


def drain_stream(
    kinesis: KinesisClient,
    stream: str,
    start: Position | None = None,
    *,
    chunk_records: int = 10_000,
    fetch_interval_s: float = MIN_FETCH_INTERVAL_S,
    state: DrainState | None = None,
    on_shard_done: Callable[[str, DrainState], None] | None = None,
    end: datetime | None = None,
    strict_aggregation: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> Iterator[ShardRead]:
    """Yield :class:`ShardRead` chunks in lineage order until every shard is done (``DrainState``).

    Shards of the first listing start at ``start`` (default TRIM_HORIZON), later ones at
    TRIM_HORIZON, as the KCL's child leases do. ``end`` (aware datetime, inclusive) is an
    arrival-time cut: a shard past it stops and its children are skipped. KPL aggregates come
    out as user records; ``strict_aggregation`` fails on a malformed one. Up to ``workers``
    shards are read at once; the output is the same as with ``workers=1``.
    """

    start = start or Position.trim_horizon()
    state = state or DrainState()
    discovery = ShardDiscovery(kinesis, stream)
    initial = set(discovery.refresh(start))
    while True:
        ready = [s for s in discovery.graph.ready(state.drained) if not state.done(s)]
        if not ready:
            return
        readers = {
            sid: ShardReader(
                kinesis, stream, sid, start if sid in initial else Position.trim_horizon(),
                fetch_interval_s=fetch_interval_s, strict_aggregation=strict_aggregation,
            )
            for sid in ready
        }
        last_stop: dict[str, StopReason] = {}
        chunks = read_in_order(
            ready, lambda sid, readers=readers: _read_shard(readers[sid], chunk_records, end),
            workers=workers, buffer=READ_AHEAD_BYTES, weigh=_data_bytes,
        )
        for item in chunks:
            if isinstance(item, ShardDone):
                _shard_done(discovery, readers[item.shard_id], last_stop[item.shard_id], state)
                if on_shard_done:
                    on_shard_done(item.shard_id, state)
                continue
            state.records += item.record_count
            last_stop[item.shard_id] = item.stop_reason
            yield item


def _data_bytes(chunk: ShardRead) -> int:
    return sum(page.byte_count for page in chunk.pages)


_FINAL_STOPS = frozenset({StopReason.SHARD_END, StopReason.CAUGHT_UP, StopReason.END_TIMESTAMP})


def _read_shard(reader: ShardReader, chunk_records: int, end: datetime | None) -> Iterator[ShardRead]:
    """One shard's chunks, to its end, its tip or the cut (runs in a reader thread: touches no shared state)."""
    while True:
        chunk = reader.read(max_records=chunk_records, until_caught_up=True, end_timestamp=end)
        yield chunk
        if chunk.stop_reason in _FINAL_STOPS:
            return


def _shard_done(discovery: ShardDiscovery, reader: ShardReader, stop: StopReason, state: DrainState) -> None:
    if reader.shard_ended:
        state.drained.add(reader.shard_id)
        _learn_children(discovery, reader)
    elif stop is StopReason.END_TIMESTAMP:
        state.past_end.add(reader.shard_id)
    else:
        state.caught_up.add(reader.shard_id)


def _learn_children(discovery: ShardDiscovery, reader: ShardReader) -> None:
    """A parent that ended names its children; list again if the graph has not seen them."""
    unknown = [c.shard_id for c in reader.child_shards if c.shard_id not in discovery.graph]
    if unknown or not reader.child_shards:
        discovery.refresh()
