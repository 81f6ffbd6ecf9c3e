"""Leases spread over several partition keys (leases/layout.py, issue #12), and tables of the earlier
single-key layout: read as they are, checkpoints kept, new leases written where old workers see them."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.leases.layout import LeaseLayout, partitions_for
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.schema.lease_items import LeaseCodec
from kinesis_src.leases.table import LeaseTable
from kinesis_src.records import ChildShard
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
TABLE = "kinesis-src-layout"
FULL = HashRange(0, MAX_HASH_KEY)


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))
        LeaseTable(client, TABLE, "app", "orders").ensure_table()
        yield client


def sid(i: int) -> str:
    return f"shardId-{i:012d}"


def partition_keys(dynamodb: DynamoDBClient) -> dict[str, list[str]]:
    """Every item of the table, by partition key: sort keys in order."""
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=TABLE, ConsistentRead=True)["Items"]
    out: dict[str, list[str]] = {}
    for item in items:
        out.setdefault(item["pk"]["S"], []).append(item["sk"]["S"])
    return {pk: sorted(sks) for pk, sks in out.items()}


def write_as_the_earlier_version(dynamodb: DynamoDBClient, count: int) -> None:
    """Lease items as the previous release wrote them: all under lease#app#orders, checkpointed, no layout item."""
    codec, plain = LeaseCodec(TABLE), boto3.client("dynamodb", region_name="us-east-1")
    for i in range(count):
        lease = Lease(sid(i), Checkpoint.sequence(str(1000 + i)), FULL, counter=3, owner="old-worker")
        plain.put_item(TableName=TABLE, Item=codec.lease_item("lease#app#orders", lease))


def test_a_table_of_the_earlier_layout_keeps_its_checkpoints_and_stays_readable_by_old_workers(dynamodb) -> None:
    write_as_the_earlier_version(dynamodb, 3)
    table = LeaseTable(dynamodb, TABLE, "app", "orders", lease_partitions=8)  # asks for 8: too late
    leases = {l.shard_id: l for l in table.list_leases()}
    assert {s: l.checkpoint for s, l in leases.items()} == {sid(i): Checkpoint.sequence(str(1000 + i)) for i in range(3)}
    assert table.layout() == LeaseLayout("lease#app#orders", 1, recorded=True)  # recorded as it was found
    taken = table.take_lease(leases[sid(0)], "new-worker")
    assert taken is not None
    table.checkpoint(taken, Checkpoint.sequence("2000"))
    child = Lease.for_child(ChildShard(sid(7), (sid(0),), 0, MAX_HASH_KEY))
    table.mark_shard_end(table.get_lease(sid(0)), [child])
    keys = partition_keys(dynamodb)
    # every lease, the new child included, is where the earlier version reads them; its scan accepts
    # shard# and worker# sort keys only, and the layout item is under a partition key of its own
    assert keys["lease#app#orders"] == [f"shard#{sid(i)}" for i in (0, 1, 2, 7)]
    assert keys["layout#app#orders"] == ["layout"]
    assert set(keys) == {"lease#app#orders", "layout#app#orders"}
    assert LeaseTable(dynamodb, TABLE, "app", "orders").get_lease(sid(1)).checkpoint == Checkpoint.sequence("1001")


def test_new_leases_spread_over_the_recorded_partition_keys(dynamodb) -> None:
    table = LeaseTable(dynamodb, TABLE, "app", "orders", lease_partitions=4)
    for i in range(40):
        assert table.create_lease(Lease(sid(i), Checkpoint.trim_horizon(), FULL))
    me = table.register_worker("w1")
    keys = partition_keys(dynamodb)
    buckets = [k for k in keys if k.startswith("lease#app#orders/")]
    assert sorted(buckets) == [f"lease#app#orders/{k}" for k in range(4)]
    assert all(len(keys[b]) >= 3 for b in buckets)  # each key holds a share
    assert keys["lease#app#orders"] == ["worker#w1"]  # the heartbeats stay under the single key
    other = LeaseTable(dynamodb, TABLE, "app", "orders")  # another worker: reads the recorded layout
    view = other.scan()
    assert sorted(view.leases) == [sid(i) for i in range(40)] and list(view.workers) == ["w1"] == [me.worker_id]
    assert other.known_partitions() == 4
    taken = other.take_lease(view.leases[sid(5)], "w1")
    assert other.checkpoint(taken, Checkpoint.sequence("7")).checkpoint == Checkpoint.sequence("7")
    assert table.get_lease(sid(5)).owner == "w1"


def test_the_first_writer_records_the_layout_and_every_worker_agrees(dynamodb) -> None:
    first = LeaseTable(dynamodb, TABLE, "app", "orders", lease_partitions=3)
    second = LeaseTable(dynamodb, TABLE, "app", "orders", lease_partitions=5)
    assert second.layout().recorded is False  # nothing recorded yet: readers read the single key
    assert first.ensure_layout().partitions == 3
    assert second.ensure_layout().partitions == 3
    assert LeaseTable(dynamodb, TABLE, "app", "orders").ensure_layout(expected_leases=50_000).partitions == 3


def test_a_shard_sync_sizes_the_layout_by_the_stream(dynamodb) -> None:
    assert [partitions_for(n) for n in (0, 4, 1000, 1001, 10_000, 10**6)] == [1, 1, 1, 2, 10, 64]
    table = LeaseTable(dynamodb, TABLE, "app", "big")
    assert table.ensure_layout(expected_leases=2500).partitions == 3


def test_a_scope_keeps_its_own_layout_and_keys(dynamodb) -> None:
    plain = LeaseTable(dynamodb, TABLE, "app", "orders", lease_partitions=2)
    scoped = LeaseTable(dynamodb, TABLE, "app", "orders", scope="0-99", lease_partitions=3)
    plain.create_lease(Lease(sid(1), Checkpoint.trim_horizon(), FULL))
    scoped.create_lease(Lease(sid(1), Checkpoint.sequence("5"), FULL))
    assert plain.get_lease(sid(1)).checkpoint == Checkpoint.trim_horizon()
    assert scoped.get_lease(sid(1)).checkpoint == Checkpoint.sequence("5")
    assert [l.shard_id for l in scoped.list_leases()] == [sid(1)] == [l.shard_id for l in plain.list_leases()]
    keys = partition_keys(dynamodb)
    assert {"layout#app#orders", "layout#app#orders#0-99"} <= set(keys)
    assert any(k.startswith("lease#app#orders#0-99/") for k in keys)


@pytest.mark.parametrize("bad", [0, 65, -1, 2.5, "4"])
def test_a_bad_partition_count_names_the_option(bad) -> None:
    with pytest.raises(ValueError, match="lease_partitions must be an integer in 1..64"):
        LeaseTable(None, TABLE, "app", "orders", lease_partitions=bad)  # type: ignore[arg-type]
