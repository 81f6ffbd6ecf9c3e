"""Record pages from the dicts botocore's own parser returns, where it parsed a body instead of
:mod:`.body_decode` (a fallback of :mod:`.botocore_internals`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..records import ChildShard, RecordPage

NEXT_ITERATOR = "NextShardIterator"
CONTINUATION = "ContinuationSequenceNumber"


def child_shard(raw: dict[str, Any]) -> ChildShard:
    """A ``ChildShards`` entry (GetRecords and SubscribeToShard events name them the same way)."""
    hash_range = raw["HashKeyRange"]
    return ChildShard(
        shard_id=raw["ShardId"],
        parent_shards=tuple(raw.get("ParentShards") or ()),
        starting_hash_key=int(hash_range["StartingHashKey"]),
        ending_hash_key=int(hash_range["EndingHashKey"]),
    )


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    return value.timestamp() if isinstance(value, datetime) else float(value)


def page_from_botocore(raw: dict[str, Any], next_key: str = NEXT_ITERATOR) -> RecordPage:
    """A GetRecords output or SubscribeToShardEvent as botocore parses it; ``next_key`` continues
    the read (``NextShardIterator`` for GetRecords, ``ContinuationSequenceNumber`` for an event)."""
    records = raw.get("Records") or []
    return RecordPage(
        partition_keys=[r.get("PartitionKey") for r in records],
        data=[bytes(r.get("Data") or b"") for r in records],
        sequence_numbers=[r["SequenceNumber"] for r in records],
        arrival_epoch=[_epoch(r.get("ApproximateArrivalTimestamp")) for r in records],
        encryption_types=[r.get("EncryptionType") for r in records],
        next_iterator=raw.get(next_key),
        millis_behind_latest=raw.get("MillisBehindLatest"),
        child_shards=tuple(child_shard(c) for c in raw.get("ChildShards") or ()),
    )
