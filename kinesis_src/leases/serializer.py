"""The names the lease-table modules import from here; the schema itself is :mod:`.schema`.

:mod:`.schema.keys` holds every key, :mod:`.schema.lease_items` the lease,
heartbeat, claim and identity items (docs/leases.md, "Table layout").
"""

from __future__ import annotations

from .schema.keys import (
    CLAIM_RANGE_KEY,
    EXPECTED_KEY_SCHEMA,
    HASH_KEY,
    IDENTITY_RANGE_KEY,
    LEASE_PREFIX,
    RANGE_KEY,
    TTL_ATTRIBUTE,
    WORKER_PREFIX,
    claim_key,
    identity_key,
    lease_key,
    lease_partition,
    worker_key,
)
from .schema.lease_items import (
    CHECKPOINT,
    CHECKPOINT_SUB_SEQUENCE,
    CHECKPOINT_TIMESTAMP,
    CHILD_SHARD_IDS,
    ENDING_HASH_KEY,
    HEARTBEAT,
    HEARTBEAT_TTL_S,
    LAST_UPDATED,
    LEASE_CHANGES,
    LEASE_COUNTER,
    LEASE_NOTIFY,
    LEASE_OWNER,
    OWNER_SWITCHES,
    PARENT_SHARD_IDS,
    SESSION,
    SHARD_ID,
    STARTING_HASH_KEY,
    STEAL_REQUEST,
    STREAM_ARN,
    STREAM_CREATED,
    THROUGHPUT_AT,
    THROUGHPUT_BYTES,
    THROUGHPUT_RECORDS,
    WORKER_ID,
    LeaseCodec,
    identity_item,
    throughput_values,
)
from .schema.values import number_value as _n
from .schema.values import string_value as _s
from .schema.values import strings_value as _list

__all__ = [
    "CHECKPOINT", "CHECKPOINT_SUB_SEQUENCE", "CHECKPOINT_TIMESTAMP", "CHILD_SHARD_IDS", "CLAIM_RANGE_KEY",
    "ENDING_HASH_KEY", "EXPECTED_KEY_SCHEMA", "HASH_KEY", "HEARTBEAT", "HEARTBEAT_TTL_S", "IDENTITY_RANGE_KEY",
    "LAST_UPDATED", "LEASE_CHANGES", "LEASE_COUNTER", "LEASE_NOTIFY", "LEASE_OWNER", "LEASE_PREFIX",
    "OWNER_SWITCHES", "PARENT_SHARD_IDS", "RANGE_KEY", "SESSION", "SHARD_ID", "STARTING_HASH_KEY",
    "STEAL_REQUEST", "STREAM_ARN", "STREAM_CREATED", "THROUGHPUT_AT", "THROUGHPUT_BYTES", "THROUGHPUT_RECORDS",
    "TTL_ATTRIBUTE", "WORKER_ID", "WORKER_PREFIX", "LeaseCodec", "_list", "_n", "_s", "claim_key",
    "identity_item", "identity_key", "lease_key", "lease_partition", "throughput_values", "worker_key",
]
