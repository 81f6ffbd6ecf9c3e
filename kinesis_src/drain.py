"""Read a whole stream once, parents before children, up to the current tip.

This is the bounded read the demo, the CLI and batch jobs build on: closed
shards are read to SHARD_END, and only then do their children start, so each
partition key's records come out in the order they were written even across
splits and merges. Open shards are read until they are caught up.

With an ``end`` cut, a shard stops before its first record that arrived
after the cut, and its children are not read: a child is created when its
parent closes, so everything in it arrived after the parent's last record,
which is already past the cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Generator, Iterator

from .aws import KinesisClient
from .discovery import ShardDiscovery
from .positions import Position
from .retrieval.polling import MIN_FETCH_INTERVAL_S, ShardRead, ShardReader, StopReason

log = logging.getLogger(__name__)


@dataclass
class DrainState:
    """Which shards are done.

    ``drained`` reached SHARD_END, ``caught_up`` are open and read to the
    tip, ``past_end`` stopped at the ``end`` cut (their children are skipped).
    """

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
) -> Iterator[ShardRead]:
    """Yield :class:`ShardRead` chunks in lineage order until every shard is drained, caught up or past ``end``.

    Shards known at the first listing start at ``start`` (default
    TRIM_HORIZON); shards found later were created after the read began, so
    they start at TRIM_HORIZON, as the KCL does for child leases. ``end``
    (aware datetime, inclusive) is an arrival-time cut: records that arrived
    after it are not delivered, so a stream that keeps receiving records
    cannot keep the read going. KPL aggregates come out as their user
    records; ``strict_aggregation`` fails on a malformed one instead of
    passing it through whole.
    """
    start = start or Position.trim_horizon()
    state = state or DrainState()
    discovery = ShardDiscovery(kinesis, stream)
    initial = set(discovery.refresh(start))
    while True:
        ready = [s for s in discovery.graph.ready(state.drained) if not state.done(s)]
        if not ready:
            return
        for shard_id in ready:
            position = start if shard_id in initial else Position.trim_horizon()
            reader = ShardReader(
                kinesis, stream, shard_id, position,
                fetch_interval_s=fetch_interval_s, strict_aggregation=strict_aggregation,
            )
            stop = yield from _read_shard(reader, chunk_records, state, end)
            if reader.shard_ended:
                state.drained.add(shard_id)
                _learn_children(discovery, reader)
            elif stop is StopReason.END_TIMESTAMP:
                state.past_end.add(shard_id)
            else:
                state.caught_up.add(shard_id)
            if on_shard_done:
                on_shard_done(shard_id, state)


_FINAL_STOPS = frozenset({StopReason.SHARD_END, StopReason.CAUGHT_UP, StopReason.END_TIMESTAMP})


def _read_shard(
    reader: ShardReader, chunk_records: int, state: DrainState, end: datetime | None
) -> Generator[ShardRead, None, StopReason]:
    """Yield one shard's chunks; returns why the shard stopped."""
    while True:
        chunk = reader.read(max_records=chunk_records, until_caught_up=True, end_timestamp=end)
        state.records += chunk.record_count
        yield chunk
        if chunk.stop_reason in _FINAL_STOPS:
            return chunk.stop_reason


def _learn_children(discovery: ShardDiscovery, reader: ShardReader) -> None:
    """A parent that ended names its children; list again if the graph has not seen them."""
    unknown = [c.shard_id for c in reader.child_shards if c.shard_id not in discovery.graph]
    if unknown or not reader.child_shards:
        discovery.refresh()
