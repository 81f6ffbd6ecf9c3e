"""Table management: describe, create if missing, TTL, wait until ACTIVE, delete
(mixed into :class:`~.dynamodb.DynamoDBClient`)."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, TypeVar

from botocore.exceptions import ClientError

from ..errors import (
    AccessDeniedError,
    InvalidRequestError,
    KinesisSourceError,
    LeaseTableNotFoundError,
)
from .dynamodb_results import TableDescription, describe, error_code

T = TypeVar("T")
log = logging.getLogger(__name__)


class TableAdmin:
    """What the lease table's ``ensure_table`` needs; uses the client's ``_call`` and ``_client``."""

    _client: Any
    endpoint: str

    def _call(self, operation: str, table: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError  # DynamoDBClient._call

    def table_missing(self, table: str, operation: str) -> LeaseTableNotFoundError:
        raise NotImplementedError  # DynamoDBClient.table_missing

    def describe_table(self, table: str) -> TableDescription | None:
        """The table's description, or None when it does not exist."""

        def attempt() -> dict[str, Any] | None:
            try:
                return self._client.describe_table(TableName=table)["Table"]
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return None
                raise

        raw = self._call("DescribeTable", table, attempt)
        return None if raw is None else describe(raw)

    def create_table_if_missing(
        self,
        table: str,
        hash_key: str,
        range_key: str,
        timeout_s: float = 120.0,
    ) -> tuple[TableDescription, bool]:
        """Create an on-demand table unless it exists, wait until ACTIVE; (description, created).
        Safe to race. The caller checks an existing table is its own, then calls :meth:`ensure_ttl`.
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
                if error_code(exc) == "ResourceInUseException":
                    return False
                raise

        created = self._call("CreateTable", table, attempt)
        return self.wait_active(table, timeout_s), created

    def ensure_ttl(self, table: str, attribute: str) -> None:
        """Enable TTL on ``attribute`` unless it is on already; a warning when that cannot be done,
        since TTL is only garbage collection (docs/leases.md, "The table")."""
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
