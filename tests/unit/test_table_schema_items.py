"""The lease table's on-disk format: one item of each kind, built by the schema and by its writer, equals a literal.

The literals were written from the items the code produced before the schema
moved into kinesis_src.leases.schema; a change to a key string or attribute
name makes existing tables unreadable, so it must fail here first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.consumer import unit_registry
from kinesis_src.consumer.processing.options import Ordering
from kinesis_src.consumer.processing.ordering_claim import claim_ordering
from kinesis_src.consumer.range_claims import RangeClaim, RangeClaims
from kinesis_src.consumer.stream_list import note_stream_list
from kinesis_src.consumer.units import FULL, Split, UnitMap
from kinesis_src.identity import StreamIdentity
from kinesis_src.in_place import run_sync
from kinesis_src.leases.layout_records import LayoutRecords
from kinesis_src.leases.model import Checkpoint, Lease, Throughput, WorkerHeartbeat
from kinesis_src.leases.progress_store import ProgressStore, ShardProgress
from kinesis_src.leases.schema import batch_items, consumer_items, keys
from kinesis_src.leases.schema.keys import (
    claim_key,
    identity_key,
    lease_partition,
    worker_key,
)
from kinesis_src.leases.schema.lease_items import LeaseCodec, identity_item, layout_item
from kinesis_src.positions import Position
from kinesis_src.spark.plan_store import PlanStore
from lineage import HashRange, KeyRange

APP, STREAM, TABLE = "app", "orders", "kinesis-src-app"
DAY_S = 24 * 3600


@dataclass
class _Write:
    ok: bool = True
    item: Any = None


@dataclass
class RecordingDynamoDB:
    """Records every item put; reads find nothing (so every writer writes)."""

    now_s: int = 2_000_000_000
    puts: list[dict[str, Any]] = field(default_factory=list)

    def put_item(self, table: str, item: dict[str, Any], condition: str | None = None, **expr: Any) -> _Write:
        self.puts.append(item)
        return _Write()

    def get_item(self, table: str, key: dict[str, Any], consistent: bool = True) -> None:
        return None

    def query(self, table: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return []

    def server_time_s(self) -> float:
        return float(self.now_s)


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def test_a_lease_item() -> None:
    lease = Lease("shardId-000000000001", Checkpoint.sequence("4955", 3), HashRange(0, 99), counter=7, owner="w1",
                  parent_shard_ids=("shardId-000000000000",), owner_switches_since_checkpoint=1,
                  last_updated_ms=1234, throughput=Throughput(12.5, 300.25, 999))
    item = LeaseCodec(TABLE).lease_item(lease_partition(APP, STREAM, "0-99"), lease)
    assert item == {
        "pk": s("lease#app#orders#0-99"), "sk": s("shard#shardId-000000000001"),
        "shardId": s("shardId-000000000001"), "leaseCounter": n(7), "checkpoint": s("4955"),
        "checkpointSubSequenceNumber": n(3), "parentShardIds": {"L": [s("shardId-000000000000")]},
        "childShardIds": {"L": []}, "startingHashKey": s("0"), "endingHashKey": s("99"),
        "ownerSwitchesSinceCheckpoint": n(1), "lastUpdated": n(1234), "leaseOwner": s("w1"),
        "throughputRecords": {"N": "12.500"}, "throughputBytes": {"N": "300.2"}, "throughputAt": n(999),
    }


def test_a_lease_at_a_timestamp() -> None:
    lease = Lease("shardId-000000000002", Checkpoint.at_timestamp("2026-01-31T12:00:00Z"), HashRange(5, 6))
    item = LeaseCodec(TABLE).lease_item(lease_partition(APP, STREAM), lease)
    assert (item["pk"], item["checkpoint"], item["checkpointTimestamp"]) == (
        s("lease#app#orders"), s("AT_TIMESTAMP"), s("2026-01-31T12:00:00.000000Z"))
    assert "leaseOwner" not in item


def test_a_heartbeat_and_a_query_claim() -> None:
    worker = WorkerHeartbeat("w1", "abc", 4, 55)
    codec = LeaseCodec(TABLE)
    fields = {"workerId": s("w1"), "session": s("abc"), "heartbeat": n(4), "lastUpdated": n(55), "ttl": n(77)}
    assert codec.heartbeat_item(worker_key(lease_partition(APP, STREAM), "w1"), worker, 77) == {
        "pk": s("lease#app#orders"), "sk": s("worker#w1"), **fields}
    assert codec.heartbeat_item(claim_key(APP, STREAM), worker, 77) == {
        "pk": s("claim#app#orders"), "sk": s("query"), **fields}


def test_a_stream_identity() -> None:
    identity = StreamIdentity("arn:aws:kinesis:us-east-1:000000000000:stream/orders",
                              datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert identity_item(identity_key(APP, STREAM), identity) == {
        "pk": s("stream#app#orders"), "sk": s("identity"),
        "streamArn": s("arn:aws:kinesis:us-east-1:000000000000:stream/orders"),
        "streamCreated": s(identity.to_dict()["created"]),
    }
    assert identity.to_dict()["created"].startswith("2026-01-02T03:04:05")


class _Layouts(LayoutRecords):
    def __init__(self, dynamodb: RecordingDynamoDB, scope: str) -> None:
        self.dynamodb, self.table_name, self.application, self.stream = dynamodb, TABLE, APP, STREAM  # type: ignore[assignment]
        self.scope, self.partition, self.codec = scope, lease_partition(APP, STREAM, scope), LeaseCodec(TABLE)
        self.lease_partitions, self._layout = None, None


def test_a_layout_item() -> None:
    dynamodb = RecordingDynamoDB()
    _Layouts(dynamodb, "").ensure_layout(2500)
    _Layouts(dynamodb, "0-99").ensure_layout(1)
    assert dynamodb.puts == [
        {"pk": s("layout#app#orders"), "sk": s("layout"), "leasePartitions": n(3)},
        {"pk": s("layout#app#orders#0-99"), "sk": s("layout"), "leasePartitions": n(1)},
    ]
    assert layout_item(keys.layout_key(APP, STREAM, "0-99"), 1) == dynamodb.puts[1]


def test_a_progress_item() -> None:
    dynamodb = RecordingDynamoDB()
    store = ProgressStore(dynamodb, TABLE, APP, STREAM, now_ms=lambda: 4242)  # type: ignore[arg-type]
    progress = ShardProgress("shardId-000000000001", Position.after_sequence("4955", 2), shard_ended=True,
                             child_shard_ids=("shardId-000000000003",), records=10, stop_reason="shard_end",
                             millis_behind_latest=0, byte_count=100, throttles=1, retries=2)
    store.record("run1", 3, progress)
    assert dynamodb.puts == [{
        "pk": s("progress#app#orders#run1#3"), "sk": s("shard#shardId-000000000001"),
        "shardId": s("shardId-000000000001"),
        "endPosition": s('{"kind":"AFTER_SEQUENCE_NUMBER","sequenceNumber":"4955","subSequenceNumber":2}'),
        "shardEnded": {"BOOL": True}, "childShardIds": {"L": [s("shardId-000000000003")]}, "records": n(10),
        "recordedAt": n(4242), "stopReason": s("shard_end"), "millisBehindLatest": n(0), "bytes": n(100),
        "throttles": n(1), "retries": n(2),
    }]
    key = keys.lease_key(keys.progress_partition(APP, STREAM, "run1", 3), "shardId-000000000001")
    assert batch_items.progress_item(key, progress, 4242) == dynamodb.puts[0]
    assert batch_items.progress_of(LeaseCodec(TABLE), dynamodb.puts[0]) == progress


def test_a_plan_item() -> None:
    dynamodb = RecordingDynamoDB()
    PlanStore(dynamodb, TABLE, APP, STREAM, part_bytes=4).put("run1", 3, "d1g", "{}")  # type: ignore[arg-type]
    assert [(i["pk"], i["sk"], i["parts"]) for i in dynamodb.puts] == [
        (s("plan#app#orders#run1#3"), s("d1g#0000"), n(3)), (s("plan#app#orders#run1#3"), s("d1g#0001"), n(3)),
        (s("plan#app#orders#run1#3"), s("d1g#0002"), n(3)),
    ]
    assert sorted(dynamodb.puts[0]) == ["body", "parts", "pk", "sk"]
    part = batch_items.plan_part_item(keys.plan_partition(APP, STREAM, "run1", 3), "d1g", 1, b"xy", 3)
    assert part == {"pk": s("plan#app#orders#run1#3"), "sk": s("d1g#0001"), "body": {"B": b"xy"}, "parts": n(3)}
    assert b"".join(i["body"]["B"] for i in dynamodb.puts) == __import__("zlib").compress(b"{}", 6)


def test_a_stream_list_item() -> None:
    dynamodb = RecordingDynamoDB()
    run_sync(note_stream_list(BotocoreDynamoDB(dynamodb), TABLE, APP, ("orders", "clicks")))  # type: ignore[arg-type]
    assert dynamodb.puts == [{"pk": s("streams#app"), "sk": s("streams"), "streams": {"L": [s("orders"), s("clicks")]}}]
    assert consumer_items.stream_list_item(APP, ("orders", "clicks")) == dynamodb.puts[0]


def test_an_ordering_claim_item() -> None:
    dynamodb = RecordingDynamoDB()
    run_sync(claim_ordering(BotocoreDynamoDB(dynamodb), TABLE, APP, STREAM, Ordering.KEY, "w1"))  # type: ignore[arg-type]
    assert dynamodb.puts == [{"pk": s("processing#app#orders"), "sk": s("ordering"), "ordering": s("key"),
                              "workerId": s("w1")}]
    assert consumer_items.ordering_item(APP, STREAM, "key", "w1") == dynamodb.puts[0]


def test_a_range_claim_item() -> None:
    dynamodb = RecordingDynamoDB(now_s=4_000_000_000)
    claims = RangeClaims(dynamodb, TABLE, APP, STREAM, 10.0)  # type: ignore[arg-type]
    item = claims._item(RangeClaim("w1", KeyRange(0, 99), "abc", 5, 2), BotocoreDynamoDB(dynamodb))  # type: ignore[arg-type]
    assert item == {
        "pk": s("ranges#app#orders"), "sk": s("claim#w1"), "workerId": s("w1"), "rangeStart": s("0"),
        "rangeEnd": s("99"), "session": s("abc"), "heartbeat": n(5), "claimOrder": n(2), "ttl": n(4_000_000_000 + DAY_S),
    }
    assert consumer_items.range_claim_item(APP, STREAM, "w1", 0, 99, "abc", 5, 2, 4_000_000_000 + DAY_S) == item
    assert consumer_items.range_claim_fields(item) == ("w1", 0, 99, "abc", 5, 2)


def test_a_range_version_item_with_units() -> None:
    top = FULL.end
    units = UnitMap((KeyRange(0, 49), KeyRange(50, top)), (Split(KeyRange(0, 49), (KeyRange(0, 9), KeyRange(10, 49)), "w1"),))
    key = {"pk": s("ranges#app#orders"), "sk": s("version")}
    assert keys.range_version_key(APP, STREAM) == key
    update = unit_registry.version_update(TABLE, key, 0, units)["Update"]
    assert update["Key"] == key
    assert update["UpdateExpression"] == "SET #v = :next, #u = :units, #s = :splits"
    assert update["ExpressionAttributeNames"] == {"#v": "version", "#u": "units", "#s": "splits", "#pk": "pk"}
    assert update["ExpressionAttributeValues"][":splits"] == {"L": [{"M": {
        "unit": s("0-49"), "pieces": {"L": [s("0-9"), s("10-49")]}, "claimer": s("w1")}}]}
    assert update["ExpressionAttributeValues"][":units"] == {"L": [s("0-49"), s(f"50-{top}")]}
