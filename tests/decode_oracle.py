"""The test oracle for kinesis_src/aws/body_decode.py: the documented GetRecords shape read with ``json`` + ``base64``.

Slow and plain on purpose: the standard library parses, and every rule the
fast decode promises (docs in its module) is one explicit check here. A body
is either a page or :class:`Refused` (with the field that broke a rule);
the property tests hold the fast decode to the same answer.
"""

from __future__ import annotations

import binascii
import json
import math
from typing import Any

from kinesis_src.records import ChildShard, RecordPage, epoch_to_datetime


class Refused(ValueError):
    """The body is not of the documented shape; ``field`` names where (``top level`` for the whole body)."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class DuplicateKey(ValueError):
    """An object repeats a key: JSON leaves the meaning open, so the oracle has no answer."""


def oracle_page(body: bytes, next_key: str = "NextShardIterator") -> RecordPage:
    """The page of ``body`` by the documented rules, or :class:`Refused`."""
    try:
        doc = json.loads(body.decode("utf-8"), object_pairs_hook=_no_duplicates)
        json.dumps(doc, ensure_ascii=False).encode("utf-8")  # lone surrogates (\ud800) are not Unicode text
    except (UnicodeError, json.JSONDecodeError):
        raise Refused("top level") from None
    if not isinstance(doc, dict):
        raise Refused("top level")
    records = _objects(_optional(doc, "Records", list, "") or [], "Records")
    return RecordPage(
        partition_keys=[_optional(r, "PartitionKey", str, f"Records[{i}]") for i, r in enumerate(records)],
        data=[_data(r, f"Records[{i}]") for i, r in enumerate(records)],
        sequence_numbers=[_required(r, "SequenceNumber", str, f"Records[{i}]") for i, r in enumerate(records)],
        arrival_epoch=[_arrival(r, f"Records[{i}]") for i, r in enumerate(records)],
        encryption_types=[_optional(r, "EncryptionType", str, f"Records[{i}]") for i, r in enumerate(records)],
        next_iterator=_optional(doc, next_key, str, ""),
        millis_behind_latest=_integer(doc.get("MillisBehindLatest"), "MillisBehindLatest"),
        child_shards=tuple(_child(c, f"ChildShards[{i}]")
                           for i, c in enumerate(_objects(_optional(doc, "ChildShards", list, "") or [], "ChildShards"))),
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise DuplicateKey("a key twice")
    return dict(pairs)


def _objects(values: list[Any], where: str) -> list[dict[str, Any]]:
    for i, value in enumerate(values):
        if not isinstance(value, dict):
            raise Refused(f"{where}[{i}]")
    return values


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _optional(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise Refused(_path(where, key))
    return value


def _required(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if obj.get(key) is None:
        raise Refused(_path(where, key))
    return _optional(obj, key, kind, where)


def _data(record: dict[str, Any], where: str) -> bytes:
    text = _required(record, "Data", str, where)
    if not text.isascii() or len(text) % 4:
        raise Refused(f"{where}.Data")
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        raise Refused(f"{where}.Data") from None


def _arrival(record: dict[str, Any], where: str) -> float | None:
    value = record.get("ApproximateArrivalTimestamp")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(f"{where}.ApproximateArrivalTimestamp")
    try:
        seconds = float(value)
    except OverflowError:
        raise Refused(f"{where}.ApproximateArrivalTimestamp") from None
    if not math.isfinite(seconds):
        raise Refused(f"{where}.ApproximateArrivalTimestamp")
    return seconds


def _integer(value: Any, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise Refused(where)
    return value


def _child(raw: dict[str, Any], where: str) -> ChildShard:
    shard_id = _required(raw, "ShardId", str, where)
    hash_range = _required(raw, "HashKeyRange", dict, where)
    parents = _optional(raw, "ParentShards", list, where) or []
    if not all(isinstance(p, str) for p in parents):
        raise Refused(f"{where}.ParentShards")
    return ChildShard(
        shard_id=shard_id,
        parent_shards=tuple(parents),
        starting_hash_key=_hash_key(hash_range, "StartingHashKey", f"{where}.HashKeyRange"),
        ending_hash_key=_hash_key(hash_range, "EndingHashKey", f"{where}.HashKeyRange"),
    )


def _hash_key(hash_range: dict[str, Any], key: str, where: str) -> int:
    value = hash_range.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()):
        raise Refused(f"{where}.{key}")
    return int(value)


def page_as_botocore(page: RecordPage) -> dict[str, Any]:
    """A page in the shape botocore's own parser returns: to hold the decode to botocore's parse."""
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
        out["NextShardIterator"] = page.next_iterator
    if page.millis_behind_latest is not None:
        out["MillisBehindLatest"] = page.millis_behind_latest
    if page.child_shards:
        out["ChildShards"] = [
            {
                "ShardId": c.shard_id,
                "ParentShards": list(c.parent_shards),
                "HashKeyRange": {"StartingHashKey": str(c.starting_hash_key), "EndingHashKey": str(c.ending_hash_key)},
            }
            for c in page.child_shards
        ]
    return out
