"""Shard discovery: ListShards pages fed into the pure lineage graph.

One full listing, then only ids after the highest known; ShardFilter is dropped where refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from lineage import LineageError, ShardGraph

from .aws import KinesisClient
from .errors import InvalidRequestError, LineageListingError
from .positions import Position, PositionKind
from .stream_ref import StreamRef

log = logging.getLogger(__name__)


@dataclass
class ShardDiscovery:
    kinesis: KinesisClient
    stream: str | StreamRef  # a name, or the ref of a stream called by ARN (StreamRef.target)
    graph: ShardGraph = field(default_factory=ShardGraph)
    filter_supported: bool = True
    listings: int = 0

    def refresh(self, start: Position | None = None) -> tuple[str, ...]:
        """Update the graph; the ids new or changed. ``start`` narrows only the first listing."""

        if len(self.graph) == 0:
            return self._full(start)
        return self._incremental()

    def _full(self, start: Position | None) -> tuple[str, ...]:
        shards = self._list(shard_filter=_filter_for(start))
        changed = self._update(shards, "full listing")
        validated(self.graph, self.stream)
        log.info(
            "stream %r: %d shards known, %d open", self.stream, len(self.graph), len(self.graph.open_shards())
        )
        return changed

    def _incremental(self) -> tuple[str, ...]:
        after = self.graph.max_shard_id()
        shards = self._list(exclusive_start_shard_id=after)
        changed = self._update(shards, f"listing after {after}")
        if changed:
            log.info("stream %r: discovered shard(s) %s", self.stream, ", ".join(changed))
        return changed

    def _list(self, **kwargs: Any) -> list[dict[str, Any]]:
        if kwargs.get("shard_filter") and not self.filter_supported:
            kwargs.pop("shard_filter")
        try:
            shards = self.kinesis.list_shards(self.stream, **kwargs)
        except InvalidRequestError as exc:
            if not kwargs.get("shard_filter"):
                raise
            log.info("endpoint rejected ListShards ShardFilter (%s); listing without it", exc)
            self.filter_supported = False
            kwargs.pop("shard_filter")
            shards = self.kinesis.list_shards(self.stream, **kwargs)
        self.listings += 1
        return shards

    def _update(self, shards: list[dict[str, Any]], what: str) -> tuple[str, ...]:
        return updated(self.graph, shards, self.stream, what)


def updated(graph: ShardGraph, shards: list[dict[str, Any]], stream: object, what: str) -> tuple[str, ...]:
    """Feed a listing into ``graph``; the ids new or changed (a listing the lineage refuses is an error)."""
    try:
        return tuple(graph.update(shards))
    except LineageError as exc:
        raise LineageListingError(f"stream {stream!r}, {what}: {exc}") from exc


def validated(graph: ShardGraph, stream: object) -> ShardGraph:
    """``graph`` once a full listing made it: an inconsistent lineage is an error."""
    try:
        graph.validate()
    except LineageError as exc:
        raise LineageListingError(
            f"the shard listing of stream {stream!r} is inconsistent: {exc}. If the stream "
            "is being resharded, retry once it is ACTIVE."
        ) from exc
    return graph


def _filter_for(start: Position | None) -> dict[str, Any] | None:
    if start is None:
        return None
    if start.kind is PositionKind.LATEST:
        return {"Type": "AT_LATEST"}
    if start.kind is PositionKind.AT_TIMESTAMP:
        return {"Type": "FROM_TIMESTAMP", "Timestamp": start.timestamp}
    return None
