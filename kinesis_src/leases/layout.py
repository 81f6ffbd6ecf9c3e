"""Where one application's leases on a stream live: one partition key, or spread over several.

Every lease of an application+stream used to live under one partition key,
``lease#<application>#<stream>``. DynamoDB serves one partition key at most
3,000 read and 1,000 write units per second, and every worker re-reads every
lease: at 10,000 shards and 100 workers the reads of that one key throttled
(the lease simulation), and retried reads held up everything behind them.

The KCL 3.x lease table keys every lease by itself (hash key ``leaseKey``)
and adds a global secondary index on ``leaseOwner``: a worker finds its own
leases through the index, and one leader scans the whole table to assign
them. Here the table is shared by applications and streams (hash ``pk``,
range ``sk``), every worker balances on a view of all leases, and a Query
reads one partition key at a time, so the leases are spread over P partition
keys instead: ``lease#<application>#<stream>/<k>``, k = crc32(shard id) mod P.
A full read is P Queries, each a P-th of the units; no index, no table change.

P is recorded once per application+stream (and scope), in an item of its own
(``layout#<application>#<stream>[#<scope>]``, sort key ``layout``), by the
first writer of a lease (put-if-absent: every worker agrees):

* a table that already holds leases under the single key (written by an
  earlier version) records P = 1 and keeps them where they are: upgrading
  keeps every checkpoint, and workers of the earlier version still see the
  leases the new ones create;
* otherwise P = the ``lease_partitions`` the LeaseTable was given, or, from
  a shard sync, one partition per :data:`LEASES_PER_PARTITION` shards
  (1 up to 1,000 shards: one Query, as before).

P never changes afterwards (a lease's key depends on it). Heartbeats stay
under the single key: the heartbeat Query and the ``worker#`` items are the
same for every layout. Until a layout is recorded, readers read the single
key and look for the record again at their next lease read.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

from .schema.keys import LAYOUT_RANGE_KEY, layout_partition, spread_partition
from .schema.lease_items import LEASE_PARTITIONS

__all__ = ["LAYOUT_RANGE_KEY", "LEASE_PARTITIONS", "LEASES_PER_PARTITION", "MAX_LEASE_PARTITIONS", "LeaseLayout",
           "layout_partition", "partitions_for", "validate_lease_partitions"]
LEASES_PER_PARTITION = 1000  # ~85 RCU per strongly consistent read of one partition's leases
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
