"""DynamoDB calls used by kinesis-src, each retried and translated (see :mod:`.boundary`).

The lease table and the progress store are the only callers. Items are in
DynamoDB's low-level typed form (``{"S": "..."}``): the serializer in
:mod:`kinesis_src.lease_table` checks every attribute's type itself, which
is how a hand-edited item gets a precise error instead of a wrong value.

A failed condition is an answer, not an error: it is returned as a
:class:`WriteResult` / :class:`TransactOutcome` with ``ok=False`` and the
item as it stood (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), never
retried. Throttling, 5xx and connection errors are retried by the one retry
policy; a transaction conflict counts as throttling. Transactions carry a
``ClientRequestToken`` so a retry of one that did land is answered as a
success instead of failing its own conditions; a retry that arrives while
the first attempt is still running gets TransactionInProgressException,
which is retried like throttling.

Every answer's HTTP ``Date`` header is kept (:meth:`DynamoDBClient.server_time_s`):
TTL values are computed on DynamoDB's clock, not on a host clock that may be
wrong.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import botocore.session
from botocore.exceptions import ClientError

from ..clock import since_boot
from ..config import AwsSettings
from ..errors import (
    AccessDeniedError,
    InvalidRequestError,
    KinesisSourceError,
    LeaseTableNotFoundError,
    ResourceNotFoundError,
    ThrottledError,
)
from .boundary import call, client_config, new_session

T = TypeVar("T")
Item = dict[str, dict[str, Any]]
log = logging.getLogger(__name__)

_CONDITION_FAILED = "ConditionalCheckFailedException"
_TRANSACTION_CANCELED = "TransactionCanceledException"
_TRANSACTION_IN_PROGRESS = "TransactionInProgressException"
_RETRIABLE_CANCEL_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
_BATCH_WRITE_MAX = 25
_TRANSACT_MAX = 100


@dataclass(frozen=True)
class TableDescription:
    """What kinesis-src checks about an existing table."""

    name: str
    status: str
    key_schema: tuple[tuple[str, str, str], ...]  # (attribute, HASH|RANGE, S|N|B)
    billing_mode: str | None


@dataclass(frozen=True)
class WriteResult:
    """Outcome of a conditional write.

    ``ok``: the write happened; ``item`` is then the item after it (updates)
    or None. Not ``ok``: the condition failed; ``item`` is the item as it
    stood (None if it does not exist).
    """

    ok: bool
    item: Item | None = None


_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_CAPACITY_OPERATIONS = _READS | {
    "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"
}


class CapacityMeter:
    """Read and write capacity units DynamoDB reports it consumed (``ReturnConsumedCapacity=TOTAL``).

    Off unless the client was built with ``measure_capacity=True``: the
    benchmarks compare the lease table's load with a partition's limits
    (3,000 RCU and 1,000 WCU per second), which request counts cannot show
    because a Query costs by the size it reads. Thread-safe; ``reads`` and
    ``writes`` are running totals.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reads = 0.0
        self.writes = 0.0
        self.by_operation: Counter[str] = Counter()

    def note(self, event_name: str = "", parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        consumed = (parsed or {}).get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        units = sum(float(entry.get("CapacityUnits") or 0.0) for entry in entries)
        with self._lock:
            if operation in _READS:
                self.reads += units
            else:
                self.writes += units
            self.by_operation[operation] += units

    def totals(self) -> tuple[float, float]:
        """(read units, write units) consumed so far."""
        with self._lock:
            return self.reads, self.writes


def _ask_for_capacity(params: dict[str, Any], model: Any = None, **_: Any) -> None:
    if model is not None and model.name in _CAPACITY_OPERATIONS:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")


@dataclass(frozen=True)
class TransactOutcome:
    """Outcome of TransactWriteItems: committed, or one reason code per action."""

    committed: bool
    reasons: tuple[str, ...] = ()
    items: tuple[Item | None, ...] = ()

    def failed_at(self) -> tuple[int, ...]:
        return tuple(i for i, code in enumerate(self.reasons) if code not in ("None", ""))


@dataclass(frozen=True)
class _ConditionFailed:
    item: Item | None


@dataclass(frozen=True)
class _Canceled:
    reasons: tuple[str, ...]
    items: tuple[Item | None, ...]


class DynamoDBClient:
    """The only DynamoDB botocore user.

    One botocore client, safe to share between threads, not picklable:
    create one per process, lazily. ``requests`` counts HTTP requests by
    operation (retries included) for the benchmarks and the cost notes.
    """

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
        self._server_time: tuple[float, float] | None = None  # (Date header, since_boot() on arrival)
        self._client.meta.events.register("before-call.dynamodb", self._count)
        self._client.meta.events.register("after-call.dynamodb", self._note_server_time)
        self.capacity = CapacityMeter()
        if measure_capacity:
            self._client.meta.events.register("provide-client-params.dynamodb", _ask_for_capacity)
            self._client.meta.events.register("after-call.dynamodb", self.capacity.note)

    def _count(self, event_name: str = "", **_: Any) -> None:
        with self._count_lock:
            self.requests[event_name.rsplit(".", 1)[-1]] += 1

    def _note_server_time(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        headers = ((parsed or {}).get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        try:
            server_s = parsedate_to_datetime(headers["date"]).timestamp()
        except (KeyError, TypeError, ValueError):  # no Date header (a stub), or an unreadable one
            return
        with self._count_lock:
            self._server_time = (server_s, since_boot())

    def server_time_s(self) -> float | None:
        """DynamoDB's time now (epoch seconds, +-1 s): the Date header of its last answer plus
        the time elapsed here since. None before the first answer."""
        with self._count_lock:
            seen = self._server_time
        return None if seen is None else seen[0] + (since_boot() - seen[1])

    def request_total(self) -> int:
        with self._count_lock:
            return sum(self.requests.values())

    def _call(self, operation: str, table: str, fn: Callable[[], T]) -> T:
        what = f"DynamoDB {operation} on table {table!r}"
        try:
            return call(what, self.endpoint, self.settings.retry, fn)
        except AccessDeniedError as exc:
            raise AccessDeniedError(
                f"not allowed to call dynamodb:{operation} on table {table!r} at {self.endpoint}: "
                f"{exc}. Grant dynamodb:{operation} on this table to these credentials."
            ) from exc
        except ResourceNotFoundError as exc:
            raise self.table_missing(table, operation) from exc

    def table_missing(self, table: str, operation: str) -> LeaseTableNotFoundError:
        return LeaseTableNotFoundError(
            f"DynamoDB table {table!r} does not exist at {self.endpoint} (region "
            f"{self.settings.region}; seen by {operation}). Create it by starting a worker with table "
            "creation enabled (LeaseTable.ensure_table), or check leaseTableName, region and "
            "dynamodbEndpointUrl."
        )

    # -- tables --------------------------------------------------------------------

    def describe_table(self, table: str) -> TableDescription | None:
        """The table's description, or None when it does not exist."""

        def attempt() -> dict[str, Any] | None:
            try:
                return self._client.describe_table(TableName=table)["Table"]
            except ClientError as exc:
                if _code(exc) == "ResourceNotFoundException":
                    return None
                raise

        raw = self._call("DescribeTable", table, attempt)
        return None if raw is None else _describe(raw)

    def create_table_if_missing(
        self,
        table: str,
        hash_key: str,
        range_key: str,
        timeout_s: float = 120.0,
    ) -> tuple[TableDescription, bool]:
        """Create an on-demand table unless it exists; wait until ACTIVE.

        Returns (description, created). Idempotent and safe to race: a
        ResourceInUseException from a concurrent creator means "exists".
        TTL is the caller's next step (:meth:`ensure_ttl`), once it has
        checked that an existing table is its own.
        """
        existing = self.describe_table(table)
        if existing is not None:
            return self.wait_active(table, timeout_s) if existing.status != "ACTIVE" else existing, False

        def attempt() -> bool:
            try:
                self._client.create_table(
                    TableName=table,
                    KeySchema=[
                        {"AttributeName": hash_key, "KeyType": "HASH"},
                        {"AttributeName": range_key, "KeyType": "RANGE"},
                    ],
                    AttributeDefinitions=[
                        {"AttributeName": hash_key, "AttributeType": "S"},
                        {"AttributeName": range_key, "AttributeType": "S"},
                    ],
                    BillingMode="PAY_PER_REQUEST",
                )
                return True
            except ClientError as exc:
                if _code(exc) == "ResourceInUseException":
                    return False
                raise

        created = self._call("CreateTable", table, attempt)
        return self.wait_active(table, timeout_s), created

    def ensure_ttl(self, table: str, attribute: str) -> None:
        """Enable TTL on ``attribute`` unless it is on already; warn when that cannot be done.

        Checked on every start, not only right after CreateTable: a creator
        that died between CreateTable and UpdateTimeToLive leaves a table
        whose dead workers' items never expire. TTL is garbage collection
        only, so a missing permission or a TTL on another attribute (the
        operator's choice) is a warning, not a failure.
        """
        try:
            found = self._call(
                "DescribeTimeToLive", table, lambda: self._client.describe_time_to_live(TableName=table)
            ).get("TimeToLiveDescription") or {}
            status, current = found.get("TimeToLiveStatus"), found.get("AttributeName")
            if status in ("ENABLED", "ENABLING") and current == attribute:
                return
            if status != "DISABLED":  # on another attribute, or still being disabled: not ours to change
                log.warning(
                    "table %r: TTL is %s on attribute %r, not enabled on %r: items of dead workers are "
                    "not cleaned up", table, status, current, attribute,
                )
                return
            self._call(
                "UpdateTimeToLive",
                table,
                lambda: self._client.update_time_to_live(
                    TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
                ),
            )
            log.info("table %r: enabled TTL on attribute %r", table, attribute)
        except (AccessDeniedError, InvalidRequestError) as exc:  # denied, or a concurrent starter enabled it
            log.warning("table %r: could not check or enable TTL on %r: %s", table, attribute, exc)

    def wait_active(self, table: str, timeout_s: float = 120.0, poll_s: float = 0.2) -> TableDescription:
        deadline = time.monotonic() + timeout_s
        while True:
            description = self.describe_table(table)
            if description is None:
                raise self.table_missing(table, "DescribeTable")
            if description.status == "ACTIVE":
                return description
            if time.monotonic() > deadline:
                raise KinesisSourceError(
                    f"DynamoDB table {table!r} still {description.status} after {timeout_s:.0f}s at "
                    f"{self.endpoint}"
                )
            time.sleep(poll_s)

    def delete_table(self, table: str) -> None:
        self._call("DeleteTable", table, lambda: self._client.delete_table(TableName=table))

    # -- items ---------------------------------------------------------------------

    def get_item(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        out = self._call(
            "GetItem", table, lambda: self._client.get_item(TableName=table, Key=key, ConsistentRead=consistent)
        )
        return out.get("Item")

    def put_item(self, table: str, item: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args: dict[str, Any] = {"TableName": table, "Item": item, **_expression(condition, **expr)}
        out = self._call("PutItem", table, _conditional(lambda: self._client.put_item(**args)))
        return _write_result(out, None)

    def update_item(
        self, table: str, key: Item, update: str, condition: str | None = None, **expr: Any
    ) -> WriteResult:
        """UpdateItem returning the item after the update (ALL_NEW)."""
        args: dict[str, Any] = {
            "TableName": table,
            "Key": key,
            "UpdateExpression": update,
            "ReturnValues": "ALL_NEW",
            **_expression(condition, **expr),
        }
        out = self._call("UpdateItem", table, _conditional(lambda: self._client.update_item(**args)))
        return _write_result(out, "Attributes")

    def delete_item(self, table: str, key: Item, condition: str | None = None, **expr: Any) -> WriteResult:
        args: dict[str, Any] = {"TableName": table, "Key": key, **_expression(condition, **expr)}
        out = self._call("DeleteItem", table, _conditional(lambda: self._client.delete_item(**args)))
        return _write_result(out, None)

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
        names = {"#h": hash_name}
        values: dict[str, Any] = {":h": {"S": hash_value}}
        condition = "#h = :h"
        if range_prefix is not None:
            names["#r"] = range_name or "sk"
            values[":r"] = {"S": range_prefix}
            condition += " AND begins_with(#r, :r)"
        request: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ConsistentRead": consistent,
        }
        if limit is not None:
            request["Limit"] = limit
        if projection:
            for i, attribute in enumerate(projection):
                names[f"#p{i}"] = attribute
            request["ProjectionExpression"] = ", ".join(f"#p{i}" for i in range(len(projection)))
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
        if not 0 < len(actions) <= _TRANSACT_MAX:
            raise InvalidRequestError(
                f"TransactWriteItems on table {table!r} takes 1..{_TRANSACT_MAX} actions, got {len(actions)}"
            )
        token = uuid.uuid4().hex
        request = {"TransactItems": list(actions), "ClientRequestToken": token}

        def attempt() -> dict[str, Any] | _Canceled:
            try:
                return self._client.transact_write_items(**request)
            except ClientError as exc:
                if _code(exc) == _TRANSACTION_IN_PROGRESS:  # our own earlier attempt, still running
                    raise ThrottledError(f"DynamoDB TransactWriteItems on table {table!r}: {exc}") from exc
                if _code(exc) != _TRANSACTION_CANCELED:
                    raise
                return _cancellation(exc, table)

        out = self._call("TransactWriteItems", table, attempt)
        if isinstance(out, _Canceled):
            return TransactOutcome(False, out.reasons, out.items)
        return TransactOutcome(True, tuple("None" for _ in actions), tuple(None for _ in actions))

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


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _expression(condition: str | None, names: Mapping[str, str] | None = None,
                values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if condition:
        args["ConditionExpression"] = condition
        args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if names:
        args["ExpressionAttributeNames"] = dict(names)
    if values:
        args["ExpressionAttributeValues"] = dict(values)
    return args


def _conditional(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any] | _ConditionFailed]:
    """Turn ConditionalCheckFailedException into a value before the boundary translates it."""

    def attempt() -> dict[str, Any] | _ConditionFailed:
        try:
            return fn()
        except ClientError as exc:
            if _code(exc) == _CONDITION_FAILED:
                return _ConditionFailed(exc.response.get("Item"))
            raise

    return attempt


def _write_result(out: dict[str, Any] | _ConditionFailed, key: str | None) -> WriteResult:
    if isinstance(out, _ConditionFailed):
        return WriteResult(False, out.item)
    return WriteResult(True, out.get(key) if key else None)


def _cancellation(error: ClientError, table: str) -> _Canceled:
    """Reasons per action; contention and throttling become a retriable error."""
    raw = error.response.get("CancellationReasons") or ()
    reasons = tuple(str(r.get("Code") or "None") for r in raw)
    retriable = sorted(set(reasons) & _RETRIABLE_CANCEL_REASONS)
    if retriable:
        raise ThrottledError(f"DynamoDB TransactWriteItems on table {table!r} cancelled: {', '.join(retriable)}")
    if "ValidationError" in reasons:
        messages = "; ".join(str(r.get("Message", "")) for r in raw if r.get("Code") == "ValidationError")
        raise InvalidRequestError(f"DynamoDB TransactWriteItems on table {table!r} rejected: {messages}")
    return _Canceled(reasons, tuple(r.get("Item") for r in raw))


def _describe(raw: Mapping[str, Any]) -> TableDescription:
    types = {d["AttributeName"]: d["AttributeType"] for d in raw.get("AttributeDefinitions", ())}
    schema = tuple(
        (k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?")) for k in raw.get("KeySchema", ())
    )
    billing = (raw.get("BillingModeSummary") or {}).get("BillingMode")
    return TableDescription(str(raw["TableName"]), str(raw["TableStatus"]), schema, billing)
