"""Pure, deterministic shard-lineage tracking for Kinesis Data Streams.

No I/O, stdlib only: a reader feeds ListShards pages in and asks which shards to read next.
"""

from lineage.errors import (
    HashSpaceError,
    KeyRangeError,
    LineageConflictError,
    LineageCycleError,
    LineageError,
    LineageFormatError,
    MalformedShardError,
    NoOwnerError,
    ParentConflictError,
    UnknownShardError,
)
from lineage.graph import ShardGraph
from lineage.hashspace import MAX_HASH_KEY, MIN_HASH_KEY, HashRange
from lineage.key_range import KeyRange, hash_key_of
from lineage.shard import Shard, shard_sort_key

__all__ = [
    "MAX_HASH_KEY",
    "MIN_HASH_KEY",
    "HashRange",
    "HashSpaceError",
    "KeyRange",
    "KeyRangeError",
    "LineageConflictError",
    "LineageCycleError",
    "LineageError",
    "LineageFormatError",
    "MalformedShardError",
    "NoOwnerError",
    "ParentConflictError",
    "Shard",
    "ShardGraph",
    "UnknownShardError",
    "hash_key_of",
    "shard_sort_key",
]
