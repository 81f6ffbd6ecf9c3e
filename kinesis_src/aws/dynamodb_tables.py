"""Table management, written once for both clients: describe, create if missing, TTL, wait until ACTIVE.

Each step awaits ``dynamodb.admin`` (:class:`~.async_dynamodb.AsyncDynamoDBClient`, or
:class:`~.botocore_dynamodb.BotocoreDynamoDB`, which a synchronous caller runs in place).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from ..errors import AccessDeniedError, InvalidRequestError, KinesisSourceError
from ..in_place import pause
from .dynamodb_results import TableDescription, describe

log = logging.getLogger(__name__)


class Admin(Protocol):
    endpoint: str

    async def admin(self, operation: str, table: str, request: dict[str, Any],
                    absent: str | None = None) -> dict[str, Any] | None: ...


async def describe_table(dynamodb: Admin, table: str, must_exist: bool = False) -> TableDescription | None:
    """The table's description; None when it does not exist, or, with ``must_exist``, the error naming it."""
    raw = await dynamodb.admin("DescribeTable", table, {"TableName": table},
                               absent=None if must_exist else "ResourceNotFoundException")
    return None if raw is None else describe(raw["Table"])


async def create_table_if_missing(dynamodb: Admin, table: str, hash_key: str, range_key: str,
                                  timeout_s: float = 120.0) -> tuple[TableDescription, bool]:
    """Create an on-demand table unless it exists, wait until ACTIVE; (description, created).
    Safe to race. The caller checks an existing table is its own, then calls :func:`ensure_ttl`."""
    existing = await describe_table(dynamodb, table)
    if existing is not None:
        return existing if existing.status == "ACTIVE" else await wait_active(dynamodb, table, timeout_s), False
    keys = [(hash_key, "HASH"), (range_key, "RANGE")]
    request = {"TableName": table, "BillingMode": "PAY_PER_REQUEST",
               "KeySchema": [{"AttributeName": name, "KeyType": kind} for name, kind in keys],
               "AttributeDefinitions": [{"AttributeName": name, "AttributeType": "S"} for name, _ in keys]}
    created = await dynamodb.admin("CreateTable", table, request, absent="ResourceInUseException") is not None
    return await wait_active(dynamodb, table, timeout_s), created


async def ensure_ttl(dynamodb: Admin, table: str, attribute: str) -> None:
    """Enable TTL on ``attribute`` unless it is on already; a warning when that cannot be done,
    since TTL is only garbage collection (docs/leases.md, "The table")."""
    try:
        found = (await dynamodb.admin("DescribeTimeToLive", table, {"TableName": table}) or {}).get(
            "TimeToLiveDescription") or {}
        status, current = found.get("TimeToLiveStatus"), found.get("AttributeName")
        if status in ("ENABLED", "ENABLING") and current == attribute:
            return
        if status != "DISABLED":  # on another attribute, or still being disabled: not ours to change
            log.warning("table %r: TTL is %s on attribute %r, not enabled on %r: items of dead workers are "
                        "not cleaned up", table, status, current, attribute)
            return
        await dynamodb.admin("UpdateTimeToLive", table, {
            "TableName": table, "TimeToLiveSpecification": {"Enabled": True, "AttributeName": attribute}})
        log.info("table %r: enabled TTL on attribute %r", table, attribute)
    except (AccessDeniedError, InvalidRequestError) as exc:  # denied, or a concurrent starter enabled it
        log.warning("table %r: could not check or enable TTL on %r: %s", table, attribute, exc)


async def wait_active(dynamodb: Admin, table: str, timeout_s: float = 120.0, poll_s: float = 0.2) -> TableDescription:
    deadline = time.monotonic() + timeout_s
    while True:
        description = await describe_table(dynamodb, table, must_exist=True)
        assert description is not None
        if description.status == "ACTIVE":
            return description
        if time.monotonic() > deadline:
            raise KinesisSourceError(
                f"DynamoDB table {table!r} still {description.status} after {timeout_s:.0f}s at {dynamodb.endpoint}"
            )
        await pause(poll_s)
