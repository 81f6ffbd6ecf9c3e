"""The async DynamoDB calls over botocore: where aiobotocore cannot serve, and for in-place steps.

Apart from :mod:`.async_dynamodb`, so sync paths (:mod:`kinesis_src.in_place`) skip aiobotocore."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ..in_place import in_place
from .dynamodb import DynamoDBClient
from .dynamodb_results import Item, TransactOutcome, WriteResult

T = TypeVar("T")


class BotocoreDynamoDB:
    """:class:`AsyncDynamoDBClient`'s calls over the botocore client: made in place while
    :func:`~kinesis_src.in_place.run_sync` runs a step, else each on a worker thread."""

    def __init__(self, client: DynamoDBClient) -> None:
        self.client = client

    @property
    def endpoint(self) -> str:
        return self.client.endpoint

    def server_time_s(self) -> float | None:
        return self.client.server_time_s()

    @property
    def requests(self) -> Any:
        """Requests by operation, the botocore client's count."""
        return self.client.requests

    async def __aenter__(self) -> BotocoreDynamoDB:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if in_place():
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def get_item(self, table: str, key: Item) -> Item | None:
        return await self._run(self.client.get_item, table, key)

    async def update_item(self, table: str, key: Item, update: str, condition: str | None = None,
                          **expr: Any) -> WriteResult:
        return await self._run(self.client.update_item, table, key, update, condition, **expr)

    async def put_item(self, table: str, item: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        return await self._run(self.client.put_item, table, item, condition, **expr)

    async def delete_item(self, table: str, key: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        return await self._run(self.client.delete_item, table, key, condition, **expr)

    async def transact_write(self, table: str, actions: Sequence[Mapping[str, Any]]) -> TransactOutcome:
        return await self._run(self.client.transact_write, table, actions)

    async def query(self, table: str, hash_name: str, hash_value: str, range_name: str | None = None,
                    range_prefix: str | None = None, limit: int | None = None) -> list[Item]:
        return await self._run(self.client.query, table, hash_name, hash_value, range_name, range_prefix,
                               limit=limit)

    async def admin(self, operation: str, table: str, request: dict[str, Any], absent: str | None = None) -> Any:
        return await self._run(self.client.admin, operation, table, request, absent)
