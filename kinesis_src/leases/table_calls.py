"""The lease table's calls as the coordinator awaits them.

The coordinator's steps are coroutines written once. A synchronous caller
(the lease simulation, tests, the CLI) runs one with
:func:`~.in_place.run_sync`: the table's calls are made in place and the
coroutine never suspends. On an event loop (the Consumer) each call awaits the asynchronous client where
the table has a twin for it (every call but the reads of the leases alone
and shard sync), or runs on a worker thread meanwhile; every remaining thread
hop of the coordinator is in this module.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

from .in_place import in_place
from .model import (
    Checkpoint,
    HeartbeatStatus,
    Lease,
    ShardEndResult,
    TableView,
    Throughput,
    WorkerHeartbeat,
)

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDBClient
    from .listener import SyncsShards
    from .table import LeaseTable

T = TypeVar("T")

class TableCalls:
    """The table operations a coordinator makes. On an event loop: with ``offload``, each runs on a
    worker thread, except those ``dynamodb`` (the async client, once open) makes on the loop itself."""

    def __init__(self, table: LeaseTable, offload: bool = False,
                 dynamodb: Callable[[], AsyncDynamoDBClient | None] = lambda: None) -> None:
        self.table = table
        self.offload = offload
        self.dynamodb = dynamodb

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.offload and not in_place():
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _on_loop(self) -> AsyncDynamoDBClient | None:
        """The async client, where a call may use it (not while a step runs in place)."""
        return None if in_place() else self.dynamodb()

    async def list_workers(self) -> dict[str, WorkerHeartbeat]:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.alist_workers(dynamodb)
        return await self._call(self.table.list_workers)

    async def scan(self) -> TableView:
        if (dynamodb := self._on_loop()) is not None and self.table.known_layout() is not None:
            return await self.table.ascan(dynamodb)
        return await self._call(self.table.scan)

    async def list_leases(self) -> list[Lease]:
        return await self._call(self.table.list_leases)

    async def take_lease(self, lease: Lease, owner: str) -> Lease | None:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.atake_lease(dynamodb, lease, owner)
        return await self._call(self.table.take_lease, lease, owner)

    async def request_steal(self, lease: Lease, thief: str) -> Lease | None:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.arequest_steal(dynamodb, lease, thief)
        return await self._call(self.table.request_steal, lease, thief)

    async def release_lease(self, lease: Lease) -> Lease | None:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.arelease_lease(dynamodb, lease)
        return await self._call(self.table.release_lease, lease)

    async def checkpoint(self, lease: Lease, checkpoint: Checkpoint, estimate: Throughput | None) -> Lease:
        return await self._call(self.table.checkpoint, lease, checkpoint, estimate)

    async def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        if (dynamodb := self._on_loop()) is not None and self.table.known_layout() is not None:
            return await self.table.amark_shard_end(dynamodb, lease, children)
        return await self._call(self.table.mark_shard_end, lease, children)

    async def declare_worker_dead(self, beat: WorkerHeartbeat) -> bool:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.adeclare_worker_dead(dynamodb, beat)
        return await self._call(self.table.declare_worker_dead, beat)

    async def register_worker(self, worker_id: str) -> WorkerHeartbeat:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.aregister_worker(dynamodb, worker_id)
        return await self._call(self.table.register_worker, worker_id)

    async def heartbeat(self, me: WorkerHeartbeat, changed: bool, notify: tuple[str, ...],
                        ) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.aheartbeat(dynamodb, me, changed, notify)
        return await self._call(self.table.heartbeat, me, changed, notify)

    async def deregister_worker(self, me: WorkerHeartbeat) -> bool:
        if (dynamodb := self._on_loop()) is not None:
            return await self.table.aderegister_worker(dynamodb, me)
        return await self._call(self.table.deregister_worker, me)

    async def sync_shards(self, sync: SyncsShards, leases: Iterable[Lease] | None) -> object:
        return await self._call(sync.run, leases)
