"""Record pages as the dicts botocore's own parser returns, and back.

The read path decodes GetRecords bodies and SubscribeToShard events itself
(:mod:`.decode`). Where botocore parsed one instead (an event from its
public event-stream iteration, or a fallback of :mod:`.botocore_internals`),
its dict becomes the same :class:`~kinesis_src.records.RecordPage` here;
:func:`page_as_botocore` goes the other way, for tests that hold the two
paths to the same records.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..records import ChildShard, RecordPage, epoch_to_datetime

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
    """A GetRecords output or SubscribeToShardEvent as botocore parses it (Data as bytes, timestamps as datetimes).

    ``next_key`` is the field that continues the read: ``NextShardIterator``
    for GetRecords, ``ContinuationSequenceNumber`` for an event.
    """
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


def page_as_botocore(page: RecordPage) -> dict[str, Any]:
    """Render a page in the shape botocore's own parser returns (the inverse of :func:`page_from_botocore`).

    Used only to prove the two paths agree (tests) and by callers that want
    the familiar dict; the read path itself stays columnar.
    """
    records = []
    for pk, data, seq, ts, enc in zip(
        page.partition_keys, page.data, page.sequence_numbers, page.arrival_epoch, page.encryption_types
    ):
        record: dict[str, Any] = {"SequenceNumber": seq}
        if ts is not None:
            record["ApproximateArrivalTimestamp"] = epoch_to_datetime(ts)
        record["Data"] = data
        if pk is not None:
            record["PartitionKey"] = pk
        if enc is not None:
            record["EncryptionType"] = enc
        records.append(record)
    out: dict[str, Any] = {"Records": records}
    if page.next_iterator is not None:
        out[NEXT_ITERATOR] = page.next_iterator
    if page.millis_behind_latest is not None:
        out["MillisBehindLatest"] = page.millis_behind_latest
    if page.child_shards:
        out["ChildShards"] = [
            {
                "ShardId": c.shard_id,
                "ParentShards": list(c.parent_shards),
                "HashKeyRange": {
                    "StartingHashKey": str(c.starting_hash_key),
                    "EndingHashKey": str(c.ending_hash_key),
                },
            }
            for c in page.child_shards
        ]
    return out
