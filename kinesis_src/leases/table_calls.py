"""The lease table's calls as the coordinator (and its shard sync) awaits them.

On an event loop each call awaits the async client's twin; a synchronous caller runs the step in
place (:func:`~kinesis_src.in_place.run_sync`). The coordinator's only thread hops are here."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

from ..in_place import in_place
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
    from ..aws.async_dynamodb import AsyncDynamoDB
    from .listener import SyncsShards
    from .table import LeaseTable

T = TypeVar("T")

class TableCalls:
    """The table operations a coordinator makes. On an event loop: with ``offload``, each runs on a
    worker thread, except those ``dynamodb`` (the async client, once open) makes on the loop itself."""

    def __init__(self, table: LeaseTable, offload: bool = False,
                 dynamodb: Callable[[], AsyncDynamoDB | None] = lambda: None) -> None:
        self.table = table
        self.offload = offload
        self.dynamodb = dynamodb

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: in place, or on a worker thread with ``offload``."""
        if self.offload and not in_place():
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def _either(self, op: str, *args: Any, needs_layout: bool = False) -> Any:
        """``table.a<op>(dynamodb, *args)`` with the open async client: not while a step runs in place,
        and, for the reads of the whole table and SHARD_END (``needs_layout``), once the table's layout
        is known. Else ``table.<op>(*args)``, on a worker thread with ``offload``."""
        dynamodb = None if in_place() else self.dynamodb()
        if dynamodb is not None and (not needs_layout or self.table.known_layout() is not None):
            return await getattr(self.table, f"a{op}")(dynamodb, *args)
        return await self.run(getattr(self.table, op), *args)

    async def list_workers(self) -> dict[str, WorkerHeartbeat]:
        return await self._either("list_workers")

    async def scan(self) -> TableView:
        return await self._either("scan", needs_layout=True)

    async def list_leases(self) -> list[Lease]:
        return await self._either("list_leases", needs_layout=True)

    async def create_lease(self, lease: Lease) -> bool:
        return await self._either("create_lease", lease, needs_layout=True)

    async def delete_lease(self, lease: Lease, only_if_shard_end: bool) -> bool:
        return await self._either("delete_lease", lease, only_if_shard_end, needs_layout=True)

    async def ensure_layout(self, expected_leases: int) -> object:
        return await self.run(self.table.ensure_layout, expected_leases)

    async def take_lease(self, lease: Lease, owner: str) -> Lease | None:
        return await self._either("take_lease", lease, owner)

    async def request_steal(self, lease: Lease, thief: str) -> Lease | None:
        return await self._either("request_steal", lease, thief)

    async def release_lease(self, lease: Lease) -> Lease | None:
        return await self._either("release_lease", lease)

    async def checkpoint(self, lease: Lease, checkpoint: Checkpoint, estimate: Throughput | None) -> Lease:
        return await self._either("checkpoint", lease, checkpoint, estimate)

    async def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        return await self._either("mark_shard_end", lease, children, needs_layout=True)

    async def declare_worker_dead(self, beat: WorkerHeartbeat) -> bool:
        return await self._either("declare_worker_dead", beat)

    async def register_worker(self, worker_id: str) -> WorkerHeartbeat:
        return await self._either("register_worker", worker_id)

    async def heartbeat(self, me: WorkerHeartbeat, changed: bool, notify: tuple[str, ...],
                        ) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        return await self._either("heartbeat", me, changed, notify)

    async def deregister_worker(self, me: WorkerHeartbeat) -> bool:
        return await self._either("deregister_worker", me)

    async def sync_shards(self, sync: SyncsShards, leases: Iterable[Lease] | None) -> object:
        return await sync.arun(leases)
