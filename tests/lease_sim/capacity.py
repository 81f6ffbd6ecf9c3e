"""What DynamoDB charges and where it throttles: item sizes, capacity units, per-key token buckets.

Sizes follow DynamoDB's published rules closely enough for capacity: an
attribute costs its name's UTF-8 bytes plus its value (strings: UTF-8 bytes;
numbers: about one byte per two significant digits, plus one; lists: 3 bytes
plus one per element plus the elements). A strongly consistent read costs one
RCU per 4 KB (a Query page sums its items before rounding), a write one WCU
per 1 KB of the larger of the item before and after (a failed condition
still pays), a transactional write twice that.

Throttling: one token bucket per partition key and kind (3,000 RCU/s and
1,000 WCU/s, a second's worth of burst), the per-partition limits that hold
however the table is billed. All of one application's leases share one
partition key, so this is the limit the lease protocol meets first.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

PARTITION_RCU = 3000.0
PARTITION_WCU = 1000.0


def value_size(typed: Mapping[str, Any]) -> int:
    (kind, raw), = typed.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in raw)
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def read_units(size: int) -> int:
    """Strongly consistent read units for ``size`` bytes (at least one)."""
    return max(1, math.ceil(size / 4096))


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


class TokenBucket:
    """``rate`` units per second, at most one second's worth banked."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.tokens = rate
        self.at = now

    def take(self, units: float, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if units > self.tokens:
            return False
        self.tokens -= units
        return True


@dataclass
class Second:
    """What one simulated second cost."""

    requests: Counter = field(default_factory=Counter)
    throttled: Counter = field(default_factory=Counter)
    failed_conditions: Counter = field(default_factory=Counter)
    rcu: float = 0.0
    wcu: float = 0.0
    rcu_by_key: Counter = field(default_factory=Counter)  # units admitted per partition key
    wcu_by_key: Counter = field(default_factory=Counter)


class Ledger:
    """Per-second accounting of requests, consumed capacity and throttles, and the buckets."""

    def __init__(self, rcu_per_key: float = PARTITION_RCU, wcu_per_key: float = PARTITION_WCU) -> None:
        self.rcu_per_key = rcu_per_key
        self.wcu_per_key = wcu_per_key
        self.seconds: dict[int, Second] = defaultdict(Second)
        self._read: dict[str, TokenBucket] = {}
        self._write: dict[str, TokenBucket] = {}

    def admit(self, now: float, reads: Mapping[str, float], writes: Mapping[str, float]) -> bool:
        """Take the units from every partition key's buckets, or none of them (throttled)."""
        buckets = [(self._bucket(self._read, k, self.rcu_per_key, now), u) for k, u in reads.items()]
        buckets += [(self._bucket(self._write, k, self.wcu_per_key, now), u) for k, u in writes.items()]
        for bucket, units in buckets:
            bucket.take(0, now)  # refill to now
        if any(units > bucket.tokens for bucket, units in buckets):
            return False
        for bucket, units in buckets:
            bucket.take(units, now)
        second = self.seconds[int(now)]
        second.rcu_by_key.update(reads)
        second.wcu_by_key.update(writes)
        return True

    @staticmethod
    def _bucket(table: dict[str, TokenBucket], key: str, rate: float, now: float) -> TokenBucket:
        bucket = table.get(key)
        if bucket is None:
            bucket = table[key] = TokenBucket(rate, now)
        return bucket

    def record(self, now: float, operation: str, rcu: float = 0.0, wcu: float = 0.0,
               condition_failed: bool = False) -> None:
        second = self.seconds[int(now)]
        second.requests[operation] += 1
        if condition_failed:
            second.failed_conditions[operation] += 1
        second.rcu += rcu
        second.wcu += wcu

    def throttle(self, now: float, operation: str) -> None:
        second = self.seconds[int(now)]
        second.requests[operation] += 1
        second.throttled[operation] += 1
