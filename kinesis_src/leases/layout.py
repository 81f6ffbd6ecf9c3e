"""Where one application's leases on a stream live: one partition key, or spread over P of them.

P is recorded once (:mod:`.layout_records`) and never changes: a lease's key depends on it.
Why, and upgrades: docs/leases.md, "Leases over several partition keys"."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

from .schema.keys import spread_partition

LEASES_PER_PARTITION = 1000  # leases per partition key in a new layout
MAX_LEASE_PARTITIONS = 64


@dataclass(frozen=True)
class LeaseLayout:
    """``base``: the heartbeats' partition key (and the leases' when ``partitions`` is 1)."""

    base: str
    partitions: int = 1
    recorded: bool = False  # False: no layout item yet (single key assumed, looked up again later)

    def partition_of(self, shard_id: str) -> str:
        if self.partitions == 1:
            return self.base
        return spread_partition(self.base, zlib.crc32(shard_id.encode()) % self.partitions)

    def lease_partitions(self) -> tuple[str, ...]:
        if self.partitions == 1:
            return (self.base,)
        return tuple(spread_partition(self.base, k) for k in range(self.partitions))


def partitions_for(expected_leases: int) -> int:
    """How many partition keys a new layout gets for about ``expected_leases`` leases."""
    return min(MAX_LEASE_PARTITIONS, max(1, math.ceil(expected_leases / LEASES_PER_PARTITION)))


def validate_lease_partitions(value: int | None) -> int | None:
    if value is not None and not (isinstance(value, int) and 1 <= value <= MAX_LEASE_PARTITIONS):
        raise ValueError(
            f"lease_partitions must be an integer in 1..{MAX_LEASE_PARTITIONS} (or None: one per "
            f"{LEASES_PER_PARTITION} shards at the first shard sync), got {value!r}"
        )
    return value
