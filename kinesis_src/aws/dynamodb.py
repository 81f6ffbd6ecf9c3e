"""DynamoDB calls used by kinesis-src, each retried and translated (see :mod:`.boundary`).

Items are in DynamoDB's typed form (``{"S": "..."}``). A failed condition is an answer, never
retried; a transaction's retry is idempotent (docs/leases.md, "Operations")."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import botocore.session
from botocore import xform_name
from botocore.exceptions import ClientError

from ..config import AwsSettings
from ..errors import (
    AccessDeniedError,
    LeaseTableNotFoundError,
    ResourceNotFoundError,
    ThrottledError,
)
from .boundary import call, client_config, new_session
from .dynamodb_capacity import CapacityMeter, ask_for_capacity
from .dynamodb_results import (
    Canceled,
    Item,
    TableDescription,
    TransactOutcome,
    WriteResult,
    conditional,
    delete_args,
    describe,
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

__all__ = ["CapacityMeter", "DynamoDBClient", "Item", "TableDescription", "TransactOutcome", "WriteResult"]

T = TypeVar("T")
log = logging.getLogger(__name__)

_BATCH_WRITE_MAX = 25


class DynamoDBClient:
    """The only DynamoDB botocore user: thread-safe, not picklable (one per process); ``requests``
    counts HTTP requests by operation, retries included."""

    def __init__(
        self,
        settings: AwsSettings,
        session: botocore.session.Session | None = None,
        *,
        measure_capacity: bool = False,
    ) -> None:
        self.settings = settings
        url = settings.effective_dynamodb_endpoint_url
        self.endpoint = url or f"DynamoDB in {settings.region}"
        self._client = (session or new_session(settings)).create_client(
            "dynamodb", region_name=settings.region, endpoint_url=url, config=client_config(settings)
        )
        self._count_lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.server_clock = ServerClock()
        self._client.meta.events.register("before-call.dynamodb", self._count)
        self._client.meta.events.register("after-call.dynamodb", self._note_server_time)
        self.capacity = CapacityMeter()
        if measure_capacity:
            self._client.meta.events.register("provide-client-params.dynamodb", ask_for_capacity)
            self._client.meta.events.register("after-call.dynamodb", self.capacity.note)

    def _count(self, event_name: str = "", **_: Any) -> None:
        with self._count_lock:
            self.requests[event_name.rsplit(".", 1)[-1]] += 1

    def _note_server_time(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        self.server_clock.note(parsed)

    def server_time_s(self) -> float | None:
        """DynamoDB's time now, from its last answer (:class:`.server_clock.ServerClock`)."""
        return self.server_clock.now_s()

    def request_total(self) -> int:
        with self._count_lock:
            return sum(self.requests.values())

    def _call(self, operation: str, table: str, fn: Callable[[], T]) -> T:
        try:
            return call(f"DynamoDB {operation} on table {table!r}", self.endpoint, self.settings.retry, fn)
        except (AccessDeniedError, ResourceNotFoundError) as exc:
            raise named(exc, operation, table, self.endpoint, self.settings.region) from exc

    def table_missing(self, table: str, operation: str) -> LeaseTableNotFoundError:
        return table_missing(table, operation, self.endpoint, self.settings.region)

    # -- tables (the steps: :mod:`.dynamodb_tables`) --------------------------------

    def admin(self, operation: str, table: str, request: dict[str, Any], absent: str | None = None) -> Any:
        """One table-management call; None if it fails with the error code ``absent``."""
        method = getattr(self._client, xform_name(operation))

        def attempt() -> Any:
            try:
                return method(**request)
            except ClientError as exc:
                if absent is not None and error_code(exc) == absent:
                    return None
                raise

        return self._call(operation, table, attempt)

    def describe_table(self, table: str) -> TableDescription | None:
        """The table's description, or None when it does not exist."""
        raw = self.admin("DescribeTable", table, {"TableName": table}, absent="ResourceNotFoundException")
        return None if raw is None else describe(raw["Table"])

    def delete_table(self, table: str) -> None:
        self.admin("DeleteTable", table, {"TableName": table})

    # -- items ---------------------------------------------------------------------

    def get_item(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        out = self._call(
            "GetItem", table, lambda: self._client.get_item(TableName=table, Key=key, ConsistentRead=consistent)
        )
        return out.get("Item")

    def put_item(self, table: str, item: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args = put_args(table, item, condition, **expr)
        out = self._call("PutItem", table, conditional(lambda: self._client.put_item(**args)))
        return write_result(out, None)

    def update_item(
        self, table: str, key: Item, update: str, condition: str | None = None, **expr: Any
    ) -> WriteResult:
        """UpdateItem returning the item after the update (ALL_NEW)."""
        args = update_args(table, key, update, condition, **expr)
        out = self._call("UpdateItem", table, conditional(lambda: self._client.update_item(**args)))
        return write_result(out, "Attributes")

    def delete_item(self, table: str, key: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args = delete_args(table, key, condition, **expr)
        out = self._call("DeleteItem", table, conditional(lambda: self._client.delete_item(**args)))
        return write_result(out, None)

    def query(
        self,
        table: str,
        hash_name: str,
        hash_value: str,
        range_name: str | None = None,
        range_prefix: str | None = None,
        consistent: bool = True,
        projection: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Item]:
        """Every item under one partition key (optionally a sort-key prefix), all pages; with
        ``limit``, at most that many items (one request)."""
        request = query_args(table, hash_name, hash_value, range_name, range_prefix, consistent, projection, limit)
        items: list[Item] = []
        while True:
            out = self._call("Query", table, lambda req=dict(request): self._client.query(**req))
            items.extend(out.get("Items", ()))
            start = out.get("LastEvaluatedKey")
            if not start or limit is not None:
                return items
            request["ExclusiveStartKey"] = start

    def transact_write(self, table: str, actions: Sequence[Mapping[str, Any]]) -> TransactOutcome:
        """TransactWriteItems (at most 100 actions), idempotent across our own retries."""
        request = transact_request(table, actions)

        def attempt() -> dict[str, Any] | Canceled:
            try:
                return self._client.transact_write_items(**request)
            except ClientError as exc:
                return transact_failure(exc, table)

        return transact_outcome(self._call("TransactWriteItems", table, attempt), len(actions))

    def batch_delete(self, table: str, keys: Iterable[Item], max_rounds: int = 8) -> int:
        """Unconditional BatchWriteItem deletes, 25 per request; unprocessed ones are resent."""
        keys = list(keys)
        for start in range(0, len(keys), _BATCH_WRITE_MAX):
            chunk = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + _BATCH_WRITE_MAX]]
            self._batch_write(table, chunk, max_rounds)
        return len(keys)

    def _batch_write(self, table: str, requests: list[dict[str, Any]], max_rounds: int) -> None:
        pending = {table: requests}
        for round_no in range(max_rounds):
            out = self._call(
                "BatchWriteItem",
                table,
                lambda p=pending: self._client.batch_write_item(RequestItems=p),
            )
            pending = out.get("UnprocessedItems") or {}
            if not pending:
                return
            time.sleep(min(2.0, 0.05 * 2**round_no))
        raise ThrottledError(
            f"DynamoDB BatchWriteItem on table {table!r}: {len(pending.get(table, ()))} request(s) "
            f"still unprocessed after {max_rounds} rounds"
        )


def named(error: AccessDeniedError | ResourceNotFoundError, operation: str, table: str, endpoint: str,
          region: str) -> AccessDeniedError | LeaseTableNotFoundError:
    """A denied call or a missing table, told with the operation, the table and the fix."""
    if isinstance(error, AccessDeniedError):
        return AccessDeniedError(
            f"not allowed to call dynamodb:{operation} on table {table!r} at {endpoint}: "
            f"{error}. Grant dynamodb:{operation} on this table to these credentials."
        )
    return table_missing(table, operation, endpoint, region)


def table_missing(table: str, operation: str, endpoint: str, region: str) -> LeaseTableNotFoundError:
    return LeaseTableNotFoundError(
        f"DynamoDB table {table!r} does not exist at {endpoint} (region {region}; seen by {operation}). "
        "Create it by starting a worker with table creation enabled (LeaseTable.ensure_table), or check "
        "leaseTableName, region and dynamodbEndpointUrl."
    )
