"""A whole-table read: the one DynamoDB Scan kinesis-src makes, for the KCL import.

A KCL lease table is keyed by ``leaseKey`` alone, so no Query can list its items."""

from __future__ import annotations

from typing import Any

from .dynamodb import DynamoDBClient, Item


class ScanningDynamoDBClient(DynamoDBClient):
    """A :class:`DynamoDBClient` that can also read every item of a table."""

    def scan(self, table: str, consistent: bool = True) -> list[Item]:
        """Every item of ``table``, all pages, strongly consistent by default (retried like every call)."""
        request: dict[str, Any] = {"TableName": table, "ConsistentRead": consistent}
        items: list[Item] = []
        while True:
            out = self._call("Scan", table, lambda req=dict(request): self._client.scan(**req))
            items.extend(out.get("Items", ()))
            start = out.get("LastEvaluatedKey")
            if not start:
                return items
            request["ExclusiveStartKey"] = start
