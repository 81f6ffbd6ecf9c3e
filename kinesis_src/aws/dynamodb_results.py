"""DynamoDB answers as values (a failed condition is an answer, not an error), and the helpers that
turn botocore's requests and exceptions into them, for :class:`~.dynamodb.DynamoDBClient`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

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
    """Outcome of a conditional write.

    ``ok``: the write happened; ``item`` is then the item after it (updates)
    or None. Not ``ok``: the condition failed; ``item`` is the item as it
    stood (None if it does not exist).
    """

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


def conditional(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any] | ConditionFailed]:
    """Turn ConditionalCheckFailedException into a value before the boundary translates it."""

    def attempt() -> dict[str, Any] | ConditionFailed:
        try:
            return fn()
        except ClientError as exc:
            if error_code(exc) == CONDITION_FAILED:
                return ConditionFailed(exc.response.get("Item"))
            raise

    return attempt


def write_result(out: dict[str, Any] | ConditionFailed, key: str | None) -> WriteResult:
    if isinstance(out, ConditionFailed):
        return WriteResult(False, out.item)
    return WriteResult(True, out.get(key) if key else None)


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
