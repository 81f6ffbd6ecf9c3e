"""DynamoDB answers as values (a failed condition is an answer, not an error), and the helpers that
turn botocore's requests and exceptions into them, for :class:`~.dynamodb.DynamoDBClient`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Sequence

from botocore.exceptions import ClientError

from ..errors import InvalidRequestError, ThrottledError

Item = dict[str, dict[str, Any]]

CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELED = "TransactionCanceledException"
TRANSACTION_IN_PROGRESS = "TransactionInProgressException"
_RETRIABLE_CANCEL_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


@dataclass(frozen=True)
class TableDescription:
    """What kinesis-src checks about an existing table."""

    name: str
    status: str
    key_schema: tuple[tuple[str, str, str], ...]  # (attribute, HASH|RANGE, S|N|B)
    billing_mode: str | None


@dataclass(frozen=True)
class WriteResult:
    """Outcome of a conditional write: ``ok`` with the item after it (updates) or None, or not
    ``ok`` with the item as it stood (None if it does not exist)."""

    ok: bool
    item: Item | None = None


@dataclass(frozen=True)
class TransactOutcome:
    """Outcome of TransactWriteItems: committed, or one reason code per action."""

    committed: bool
    reasons: tuple[str, ...] = ()
    items: tuple[Item | None, ...] = ()


@dataclass(frozen=True)
class ConditionFailed:
    item: Item | None


@dataclass(frozen=True)
class Canceled:
    reasons: tuple[str, ...]
    items: tuple[Item | None, ...]


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def expression_args(condition: str | None, names: Mapping[str, str] | None = None,
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


def query_args(table: str, hash_name: str, hash_value: str, range_name: str | None = None,
               range_prefix: str | None = None, consistent: bool = True, projection: Sequence[str] | None = None,
               limit: int | None = None) -> dict[str, Any]:
    """Query's arguments: every item under one partition key, optionally under a sort-key prefix."""
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
    return request


def put_args(table: str, item: Item, condition: str | None = None, **expr: Any) -> dict[str, Any]:
    """PutItem's arguments."""
    return {"TableName": table, "Item": item, **expression_args(condition, **expr)}


def delete_args(table: str, key: Item, condition: str | None = None, **expr: Any) -> dict[str, Any]:
    """DeleteItem's arguments."""
    return {"TableName": table, "Key": key, **expression_args(condition, **expr)}


def update_args(table: str, key: Item, update: str, condition: str | None = None, **expr: Any) -> dict[str, Any]:
    """UpdateItem's arguments, returning the item after the update (ALL_NEW)."""
    return {"TableName": table, "Key": key, "UpdateExpression": update, "ReturnValues": "ALL_NEW",
            **expression_args(condition, **expr)}


def condition_failed(error: ClientError) -> ConditionFailed | None:
    """A failed condition as a value (the item as it stood); None for any other error."""
    return ConditionFailed(error.response.get("Item")) if error_code(error) == CONDITION_FAILED else None


def conditional(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any] | ConditionFailed]:
    """Turn ConditionalCheckFailedException into a value before the boundary translates it."""

    def attempt() -> dict[str, Any] | ConditionFailed:
        try:
            return fn()
        except ClientError as exc:
            if (failed := condition_failed(exc)) is not None:
                return failed
            raise

    return attempt


def aconditional(
    fn: Callable[[], Awaitable[dict[str, Any]]],
) -> Callable[[], Awaitable[dict[str, Any] | ConditionFailed]]:
    """:func:`conditional` for an aiobotocore call."""

    async def attempt() -> dict[str, Any] | ConditionFailed:
        try:
            return await fn()
        except ClientError as exc:
            if (failed := condition_failed(exc)) is not None:
                return failed
            raise

    return attempt


def write_result(out: dict[str, Any] | ConditionFailed, key: str | None) -> WriteResult:
    if isinstance(out, ConditionFailed):
        return WriteResult(False, out.item)
    return WriteResult(True, out.get(key) if key else None)


TRANSACT_MAX = 100


def transact_request(table: str, actions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """TransactWriteItems' arguments, with one token for every retry: idempotent across our own retries."""
    if not 0 < len(actions) <= TRANSACT_MAX:
        raise InvalidRequestError(
            f"TransactWriteItems on table {table!r} takes 1..{TRANSACT_MAX} actions, got {len(actions)}"
        )
    return {"TransactItems": list(actions), "ClientRequestToken": uuid.uuid4().hex}


def transact_failure(error: ClientError, table: str) -> Canceled:
    """A cancelled transaction as a value; our own earlier attempt still running is worth a retry."""
    if error_code(error) == TRANSACTION_IN_PROGRESS:
        raise ThrottledError(f"DynamoDB TransactWriteItems on table {table!r}: {error}") from error
    if error_code(error) != TRANSACTION_CANCELED:
        raise error
    return cancellation(error, table)


def transact_outcome(out: dict[str, Any] | Canceled, actions: int) -> TransactOutcome:
    if isinstance(out, Canceled):
        return TransactOutcome(False, out.reasons, out.items)
    return TransactOutcome(True, tuple("None" for _ in range(actions)), tuple(None for _ in range(actions)))


def cancellation(error: ClientError, table: str) -> Canceled:
    """Reasons per action; contention and throttling become a retriable error."""
    raw = error.response.get("CancellationReasons") or ()
    reasons = tuple(str(r.get("Code") or "None") for r in raw)
    retriable = sorted(set(reasons) & _RETRIABLE_CANCEL_REASONS)
    if retriable:
        raise ThrottledError(f"DynamoDB TransactWriteItems on table {table!r} cancelled: {', '.join(retriable)}")
    if "ValidationError" in reasons:
        messages = "; ".join(str(r.get("Message", "")) for r in raw if r.get("Code") == "ValidationError")
        raise InvalidRequestError(f"DynamoDB TransactWriteItems on table {table!r} rejected: {messages}")
    return Canceled(reasons, tuple(r.get("Item") for r in raw))


def describe(raw: Mapping[str, Any]) -> TableDescription:
    types = {d["AttributeName"]: d["AttributeType"] for d in raw.get("AttributeDefinitions", ())}
    schema = tuple(
        (k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?")) for k in raw.get("KeySchema", ())
    )
    billing = (raw.get("BillingModeSummary") or {}).get("BillingMode")
    return TableDescription(str(raw["TableName"]), str(raw["TableStatus"]), schema, billing)
