"""Consumed capacity, as DynamoDB reports it (``ReturnConsumedCapacity=TOTAL``), for the benchmarks."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Mapping

_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_CAPACITY_OPERATIONS = _READS | {
    "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"
}


class CapacityMeter:
    """Capacity units DynamoDB reports it consumed, as running totals; thread-safe. Only with
    ``measure_capacity=True``, for the benchmarks: a Query costs by the size it reads."""

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


def ask_for_capacity(params: dict[str, Any], model: Any = None, **_: Any) -> None:
    if model is not None and model.name in _CAPACITY_OPERATIONS:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")
