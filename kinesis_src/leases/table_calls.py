"""The lease table's calls as the coordinator (and its shard sync) awaits them.

On an event loop each call awaits the async client; a synchronous caller runs the step in place
(:func:`~kinesis_src.in_place.run_sync`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..aws.botocore_dynamodb import BotocoreDynamoDB
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

class TableCalls:
    """The table operations a coordinator makes, each written once on the table as a coroutine. It is
    awaited with ``dynamodb`` (the consumer's open async client) on a loop; else with the table's own
    client (:class:`~kinesis_src.aws.botocore_dynamodb.BotocoreDynamoDB`), in place under run_sync."""

    def __init__(self, table: LeaseTable, dynamodb: Callable[[], AsyncDynamoDB | None] = lambda: None) -> None:
        self.table = table
        self.dynamodb = dynamodb

    async def _either(self, op: str, *args: Any) -> Any:
        dynamodb = None if in_place() else self.dynamodb()
        return await getattr(self.table, f"a{op}")(dynamodb or BotocoreDynamoDB(self.table.dynamodb), *args)

    async def list_workers(self) -> dict[str, WorkerHeartbeat]:
        return await self._either("list_workers")

    async def scan(self) -> TableView:
        return await self._either("scan")

    async def list_leases(self) -> list[Lease]:
        return await self._either("list_leases")

    async def create_lease(self, lease: Lease) -> bool:
        return await self._either("create_lease", lease)

    async def delete_lease(self, lease: Lease, only_if_shard_end: bool) -> bool:
        return await self._either("delete_lease", lease, only_if_shard_end)

    async def ensure_layout(self, expected_leases: int) -> object:
        return await self._either("ensure_layout", expected_leases)

    async def take_lease(self, lease: Lease, owner: str) -> Lease | None:
        return await self._either("take_lease", lease, owner)

    async def request_steal(self, lease: Lease, thief: str) -> Lease | None:
        return await self._either("request_steal", lease, thief)

    async def release_lease(self, lease: Lease) -> Lease | None:
        return await self._either("release_lease", lease)

    async def checkpoint(self, lease: Lease, checkpoint: Checkpoint, estimate: Throughput | None) -> Lease:
        return await self._either("checkpoint", lease, checkpoint, estimate)

    async def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        return await self._either("mark_shard_end", lease, children)

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
