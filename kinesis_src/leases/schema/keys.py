"""Every key of the lease table: the key schema, the partition and sort keys of each item kind.

:data:`ITEM_KINDS` lists every kind (docs/leases.md's key table is checked against it). Names
allow only ``[A-Za-z0-9_.-]``, so ``#`` cannot make two namespaces collide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...aws.dynamodb import Item

HASH_KEY = "pk"
RANGE_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
EXPECTED_KEY_SCHEMA = ((HASH_KEY, "HASH", "S"), (RANGE_KEY, "RANGE", "S"))

LEASE_PREFIX = "shard#"  # sort key of a lease, and of a shard's progress item
WORKER_PREFIX = "worker#"
RANGE_CLAIM_PREFIX = "claim#"
CLAIM_RANGE_KEY = "query"
IDENTITY_RANGE_KEY = "identity"
LAYOUT_RANGE_KEY = "layout"
STREAM_LIST_RANGE_KEY = "streams"
ORDERING_RANGE_KEY = "ordering"
RANGE_VERSION_KEY = "version"


@dataclass(frozen=True)
class ItemKind:
    """One kind of item: its key shape (``<...>`` marks a variable part) and what it holds."""

    pk: str
    sk: str
    holds: str


ITEM_KINDS = (
    ItemKind("lease#<application>#<stream>[#<scope>][/<k>]", "shard#<shardId>", "shard lease"),
    ItemKind("lease#<application>#<stream>[#<scope>]", "worker#<workerId>", "worker heartbeat"),
    ItemKind("layout#<application>#<stream>[#<scope>]", "layout", "lease layout"),
    ItemKind("claim#<application>#<stream>", "query", "Spark query claim"),
    ItemKind("stream#<application>#<stream>", "identity", "stream identity"),
    ItemKind("progress#<application>#<stream>#<run>#<batch>", "shard#<shardId>", "Spark batch progress"),
    ItemKind("plan#<application>#<stream>#<run>#<batch>", "<digest>#<part>", "Spark batch plan part"),
    ItemKind("streams#<application>", "streams", "stream list"),
    ItemKind("ranges#<application>#<stream>", "claim#<workerId>", "key-range claim"),
    ItemKind("ranges#<application>#<stream>", "version", "claims version and unit map"),
    ItemKind("processing#<application>#<stream>", "ordering", "ordering mode"),
)


def key(partition: str, sort_key: str) -> Item:
    return {HASH_KEY: {"S": partition}, RANGE_KEY: {"S": sort_key}}


def keys_of(items: list[Item]) -> list[Item]:
    """The keys alone of ``items`` (for a batch delete)."""
    return [{HASH_KEY: i[HASH_KEY], RANGE_KEY: i[RANGE_KEY]} for i in items]


def lease_partition(application: str, stream: str, scope: str = "") -> str:
    """The partition of one application's leases and heartbeats on a stream (``scope``: a key range's own set)."""
    return f"lease#{application}#{stream}#{scope}" if scope else f"lease#{application}#{stream}"


def spread_partition(base: str, k: int) -> str:
    """The ``k``-th of the partitions a layout spreads ``base``'s leases over."""
    return f"{base}/{k}"


def lease_key(partition: str, shard_id: str) -> Item:
    return key(partition, LEASE_PREFIX + shard_id)


def worker_key(partition: str, worker_id: str) -> Item:
    return key(partition, WORKER_PREFIX + worker_id)


def layout_partition(application: str, stream: str, scope: str = "") -> str:
    """The partition key of an application+stream's (and scope's) layout item."""
    return f"layout#{application}#{stream}#{scope}" if scope else f"layout#{application}#{stream}"


def layout_key(application: str, stream: str, scope: str = "") -> Item:
    return key(layout_partition(application, stream, scope), LAYOUT_RANGE_KEY)


def claim_key(application: str, stream: str) -> Item:
    """The Spark query claim: its own partition, so no lease-partition Query ever returns it."""
    return key(f"claim#{application}#{stream}", CLAIM_RANGE_KEY)


def identity_partition(application: str, stream: str) -> str:
    return f"stream#{application}#{stream}"


def identity_key(application: str, stream: str) -> Item:
    """Which stream (ARN + creation time) an application's leases belong to: its own partition too."""
    return key(identity_partition(application, stream), IDENTITY_RANGE_KEY)


def progress_partition(application: str, stream: str, run_id: str, batch_id: int) -> str:
    return f"progress#{application}#{stream}#{run_id}#{batch_id}"


def plan_partition(application: str, stream: str, run: str, batch: int) -> str:
    return f"plan#{application}#{stream}#{run}#{batch}"


def plan_part_prefix(digest: str) -> str:
    """The sort-key prefix shared by every part of one stored plan."""
    return f"{digest}#"


def plan_part_key(partition: str, digest: str, part: int) -> Item:
    return key(partition, f"{plan_part_prefix(digest)}{part:04d}")


def stream_list_key(application: str) -> Item:
    return key(f"streams#{application}", STREAM_LIST_RANGE_KEY)


def ranges_partition(application: str, stream: str) -> str:
    return f"ranges#{application}#{stream}"


def range_claim_key(application: str, stream: str, worker_id: str) -> Item:
    return key(ranges_partition(application, stream), RANGE_CLAIM_PREFIX + worker_id)


def range_version_key(application: str, stream: str) -> Item:
    return key(ranges_partition(application, stream), RANGE_VERSION_KEY)


def ordering_partition(application: str, stream: str) -> str:
    return f"processing#{application}#{stream}"


def ordering_key(application: str, stream: str) -> Item:
    return key(ordering_partition(application, stream), ORDERING_RANGE_KEY)
