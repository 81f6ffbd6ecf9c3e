"""The Consumer's lease calls on its event loop, over aiobotocore: conditional writes, and Query.

Where aiobotocore cannot serve, :func:`open_async_dynamodb` gives :class:`BotocoreDynamoDB` instead
(docs/architecture.md, "One event loop")."""

from __future__ import annotations

from collections import Counter
from typing import Any, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from botocore import xform_name
from botocore.exceptions import ClientError

from ..config import AwsSettings
from ..errors import AccessDeniedError, ResourceNotFoundError
from .async_kinesis import aio_client_config, new_aio_session
from .botocore_dynamodb import BotocoreDynamoDB
from .boundary import acall, interceptor_active
from .dynamodb import DynamoDBClient, named
from .dynamodb_results import (
    Canceled,
    Item,
    TransactOutcome,
    WriteResult,
    aconditional,
    delete_args,
    error_code,
    put_args,
    query_args,
    transact_failure,
    transact_outcome,
    transact_request,
    update_args,
    write_result,
)
from .server_clock import ServerClock

CONNECTIONS = 16  # lease writes in flight at once: one per shard checkpointing now


def usable(settings: AwsSettings) -> bool:
    """Whether lease writes may go over aiobotocore: not under a moto mock (it answers only
    botocore's own client), nor for an endpoint URL with a path."""
    url = settings.effective_dynamodb_endpoint_url
    return not interceptor_active() and (url is None or urlsplit(url).path in ("", "/"))


class AsyncDynamoDBClient:
    """``async with AsyncDynamoDBClient(settings) as dynamodb:``; ``requests`` counts calls by operation."""

    def __init__(self, settings: AwsSettings) -> None:
        self.settings = settings
        url = settings.effective_dynamodb_endpoint_url
        self.endpoint = url or f"DynamoDB in {settings.region}"
        self.requests: Counter[str] = Counter()
        self.server_clock = ServerClock()
        self._context: Any = None
        self._client: Any = None

    async def __aenter__(self) -> AsyncDynamoDBClient:
        session = new_aio_session(self.settings)
        self._context = session.create_client(
            "dynamodb", region_name=self.settings.region, endpoint_url=self.settings.effective_dynamodb_endpoint_url,
            config=aio_client_config(self.settings, CONNECTIONS),
        )
        self._client = await self._context.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        context, self._context, self._client = self._context, None, None
        if context is not None:
            await context.__aexit__(None, None, None)

    async def update_item(
        self, table: str, key: Item, update: str, condition: str | None = None, **expr: Any
    ) -> WriteResult:
        """UpdateItem returning the item after the update (ALL_NEW)."""
        args = update_args(table, key, update, condition, **expr)
        out = await self._call("UpdateItem", table, aconditional(lambda: self._open().update_item(**args)))
        return write_result(out, "Attributes")

    async def get_item(self, table: str, key: Item) -> Item | None:
        """GetItem, read consistently."""
        out = await self._call("GetItem", table, lambda: self._open().get_item(TableName=table, Key=key,
                                                                             ConsistentRead=True))
        return out.get("Item")

    async def put_item(self, table: str, item: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args = put_args(table, item, condition, **expr)
        return write_result(await self._call("PutItem", table, aconditional(lambda: self._open().put_item(**args))),
                            None)

    async def delete_item(self, table: str, key: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args = delete_args(table, key, condition, **expr)
        return write_result(
            await self._call("DeleteItem", table, aconditional(lambda: self._open().delete_item(**args))), None)

    async def transact_write(self, table: str, actions: Sequence[Mapping[str, Any]]) -> TransactOutcome:
        """TransactWriteItems (at most 100 actions), idempotent across our own retries."""
        request = transact_request(table, actions)

        async def attempt() -> dict[str, Any] | Canceled:
            try:
                return await self._open().transact_write_items(**request)
            except ClientError as exc:
                return transact_failure(exc, table)

        return transact_outcome(await self._call("TransactWriteItems", table, attempt), len(actions))

    async def query(self, table: str, hash_name: str, hash_value: str, range_name: str | None = None,
                    range_prefix: str | None = None, limit: int | None = None) -> list[Item]:
        """Every item under one partition key (optionally a sort-key prefix), all pages, read consistently;
        with ``limit``, at most that many (one request)."""
        request = query_args(table, hash_name, hash_value, range_name, range_prefix, limit=limit)
        items: list[Item] = []
        while True:
            out = await self._call("Query", table, lambda req=dict(request): self._open().query(**req))
            items.extend(out.get("Items", ()))
            start = out.get("LastEvaluatedKey")
            if not start or limit is not None:
                return items
            request["ExclusiveStartKey"] = start

    async def admin(self, operation: str, table: str, request: dict[str, Any], absent: str | None = None) -> Any:
        """One table-management call (:mod:`.dynamodb_tables`); None if it fails with the error code ``absent``."""
        async def attempt() -> Any:
            try:
                return await getattr(self._open(), xform_name(operation))(**request)
            except ClientError as exc:
                if absent is not None and error_code(exc) == absent:
                    return None
                raise

        return await self._call(operation, table, attempt)

    def server_time_s(self) -> float | None:
        """DynamoDB's time now, from its last answer (:class:`.server_clock.ServerClock`)."""
        return self.server_clock.now_s()

    def _open(self) -> Any:
        if self._client is None:
            raise RuntimeError("AsyncDynamoDBClient is not open: use `async with AsyncDynamoDBClient(...)`")
        return self._client

    async def _call(self, operation: str, table: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """One request, retried by the settings' policy; a missing table or a denial names them."""
        self._open()

        async def counted() -> Any:
            self.requests[operation] += 1
            answer = await fn()
            if isinstance(answer, dict):  # a failed condition's answer is kept apart
                self.server_clock.note(answer)
            return answer

        try:
            return await acall(f"DynamoDB {operation} on table {table!r}", self.endpoint, self.settings.retry, counted)
        except (AccessDeniedError, ResourceNotFoundError) as exc:
            raise named(exc, operation, table, self.endpoint, self.settings.region) from exc


AsyncDynamoDB = AsyncDynamoDBClient | BotocoreDynamoDB


async def open_async_dynamodb(settings: AwsSettings) -> AsyncDynamoDB:
    """The async DynamoDB calls, open: on aiobotocore where :func:`usable`, else over botocore on threads."""
    if usable(settings):
        return await AsyncDynamoDBClient(settings).__aenter__()
    return BotocoreDynamoDB(DynamoDBClient(settings))
