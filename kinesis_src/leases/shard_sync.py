"""Shard sync: make the lease table match the stream's shard lineage.

Creates missing leases (parents first), deletes trimmed ones and cleans up drained parents; every
delete is conditional on the lease's counter (docs/leases.md, "Shard sync")."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from lineage import ShardGraph, shard_sort_key

from ..aws import KinesisClient
from ..discovery import updated, validated
from ..errors import ConfigurationError
from ..in_place import in_place, run_sync
from ..positions import Position, PositionKind
from .model import Checkpoint, Lease
from .table import LeaseTable
from .table_calls import TableCalls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncReport:
    created: tuple[str, ...] = ()
    deleted_trimmed: tuple[str, ...] = ()
    deleted_drained: tuple[str, ...] = ()
    listed: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.created or self.deleted_trimmed or self.deleted_drained)


class ShardSync:
    """Discovery -> lease creation and repair for one application's stream."""

    def __init__(
        self,
        kinesis: KinesisClient,
        table: LeaseTable,
        initial_position: Position | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        calls: TableCalls | None = None,
        akinesis: Callable[[], Any] = lambda: None,
    ) -> None:
        self.kinesis = kinesis
        self.akinesis = akinesis  # the open async client (the Consumer's), else None: the listing via ``kinesis``
        self.table = table
        self.calls = calls or TableCalls(table)
        self.initial_position = initial_position or Position.trim_horizon()
        self.clock = clock
        if self.initial_position.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER):
            raise ConfigurationError("the initial position of a stream is latest, trim_horizon or at_timestamp")

    def run(self, leases: Iterable[Lease] | None = None) -> SyncReport:
        return run_sync(self.arun(leases))

    async def arun(self, leases: Iterable[Lease] | None = None) -> SyncReport:
        """One sync. ``leases`` must have been read before this call lists the stream."""
        current = {l.shard_id: l for l in (await self.calls.list_leases() if leases is None else leases)}
        graph = ShardGraph()
        updated(graph, await self._listing(), self.table.stream, "full listing")
        validated(graph, self.table.stream)
        created = await self._create(graph, current)
        trimmed = await self._delete_trimmed(graph, current)
        drained = await self._clean_drained(graph, current)
        report = SyncReport(created, trimmed, drained, len(graph))
        if report.changed:
            log.info(
                "shard sync of stream %r: %d shards listed; created %s; deleted trimmed %s; cleaned up %s",
                self.table.stream, len(graph), _ids(created), _ids(trimmed), _ids(drained),
            )
        return report

    async def _listing(self) -> list[dict[str, Any]]:
        kinesis = None if in_place() else self.akinesis()
        if kinesis is not None:
            return await kinesis.list_shards(self.table.stream)
        if in_place():
            return self.kinesis.list_shards(self.table.stream)
        return await asyncio.to_thread(self.kinesis.list_shards, self.table.stream)  # no async client given

    # -- 1. create ------------------------------------------------------------------

    async def _create(self, graph: ShardGraph, current: dict[str, Lease]) -> tuple[str, ...]:
        fresh_table = not current
        if fresh_table:
            await self.calls.ensure_layout(len(graph))  # spread over keys by the stream's size
        consumed = _with_leased_descendant(graph, current)
        start = self._pinned_start()
        created = []
        for shard_id in graph.shard_ids():
            if shard_id in current or shard_id in consumed:
                continue
            checkpoint = self._initial_checkpoint(graph, shard_id, start) if fresh_table else Checkpoint.trim_horizon()
            if checkpoint is None:
                continue
            lease = Lease.for_shard(graph.shard(shard_id), checkpoint)
            if await self.calls.create_lease(lease):
                created.append(shard_id)
            current[shard_id] = lease
        return tuple(created)

    def _pinned_start(self) -> Checkpoint:
        """The initial position as a lease can store it: LATEST becomes this sync's instant (one for all)."""
        if self.initial_position.kind is PositionKind.LATEST:
            return Checkpoint.at_timestamp(self.clock())
        return Checkpoint.from_position(self.initial_position)

    def _initial_checkpoint(self, graph: ShardGraph, shard_id: str, start: Checkpoint) -> Checkpoint | None:
        """First lease of a shard in an empty table: None = not leased (closed shard, LATEST start)."""
        if self.initial_position.kind is PositionKind.LATEST and not graph.is_open(shard_id):
            return None
        return start

    # -- 2. trimmed -----------------------------------------------------------------

    async def _delete_trimmed(self, graph: ShardGraph, current: dict[str, Lease]) -> tuple[str, ...]:
        newest = graph.max_shard_id()
        deleted = []
        for shard_id, lease in sorted(current.items(), key=lambda kv: shard_sort_key(kv[0])):
            if shard_id in graph or newest is None or shard_sort_key(shard_id) > shard_sort_key(newest):
                continue
            if not lease.is_shard_end:
                log.warning(
                    "shard %s of stream %r is no longer listed (trimmed past retention) but its lease was "
                    "at checkpoint %s: records after that checkpoint were never processed and are lost",
                    shard_id, self.table.stream, lease.checkpoint,
                )
            if await self.calls.delete_lease(lease, only_if_shard_end=False):
                deleted.append(shard_id)
                del current[shard_id]
        return tuple(deleted)

    # -- 3. drained parents -----------------------------------------------------------

    async def _clean_drained(self, graph: ShardGraph, current: dict[str, Lease]) -> tuple[str, ...]:
        deleted = []
        for shard_id, lease in sorted(current.items(), key=lambda kv: shard_sort_key(kv[0])):
            if not lease.is_shard_end:
                continue
            children = set(lease.child_shard_ids) | (set(graph.children(shard_id)) if shard_id in graph else set())
            if not children or not all(self._child_started(c, graph, current) for c in children):
                continue
            if await self.calls.delete_lease(lease, only_if_shard_end=True):
                deleted.append(shard_id)
        for shard_id in deleted:
            del current[shard_id]
        return tuple(deleted)

    @staticmethod
    def _child_started(child: str, graph: ShardGraph, current: dict[str, Lease]) -> bool:
        lease = current.get(child)
        if lease is not None:
            return lease.checkpoint.started
        return child not in graph  # trimmed (or cleaned up itself after its own children started)


def _with_leased_descendant(graph: ShardGraph, leased: dict[str, Lease]) -> set[str]:
    """Shards some descendant of which has a lease: one pass, newest first (children have larger ids)."""
    marked: set[str] = set()
    for shard_id in reversed(graph.shard_ids()):
        if any(child in leased or child in marked for child in graph.children(shard_id)):
            marked.add(shard_id)
    return marked


def _ids(ids: tuple[str, ...]) -> str:
    return ", ".join(ids) if ids else "none"
