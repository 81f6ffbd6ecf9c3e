"""The lease table on moto: table management, the lease codec, and each conditional write's paths."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import boto3
import pytest
from botocore.exceptions import ConnectionClosedError
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import (
    AccessDeniedError,
    ConfigurationError,
    CorruptLeaseError,
    IncompatibleLeaseTableError,
    InvalidPositionError,
    LeaseLostError,
    LeaseTableNotFoundError,
)
from kinesis_src.leases.model import Checkpoint, CheckpointKind, HeartbeatStatus, Lease
from kinesis_src.leases.schema.lease_items import LeaseCodec
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
TABLE = "kinesis-src-test"
FULL = HashRange(0, MAX_HASH_KEY)
LOW = HashRange(0, 2**127 - 1)
HIGH = HashRange(2**127, MAX_HASH_KEY)


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        yield DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))


@pytest.fixture
def table(dynamodb: DynamoDBClient) -> LeaseTable:
    leases = LeaseTable(dynamodb, TABLE, "app", "orders")
    leases.ensure_table()
    return leases


def lease(shard: str = "shardId-000000000000", **kwargs) -> Lease:
    kwargs.setdefault("checkpoint", Checkpoint.trim_horizon())
    kwargs.setdefault("hash_range", FULL)
    return Lease(shard, **kwargs)


def raw_item(table: LeaseTable, shard: str) -> dict:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return client.get_item(TableName=table.table_name, Key=table._lease_key(shard), ConsistentRead=True)["Item"]


# -- table management ----------------------------------------------------------------


def test_ensure_table_creates_on_demand_with_ttl_and_is_idempotent(dynamodb: DynamoDBClient) -> None:
    leases = LeaseTable(dynamodb, TABLE, "app", "orders")
    assert leases.ensure_table() is True
    assert leases.ensure_table() is False
    plain = boto3.client("dynamodb", region_name="us-east-1")
    described = plain.describe_table(TableName=TABLE)["Table"]
    assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = plain.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "ENABLED" and ttl["AttributeName"] == "ttl"


def test_incompatible_key_schema_names_table_and_schema(dynamodb: DynamoDBClient) -> None:
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName="kcl-app",
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    with pytest.raises(IncompatibleLeaseTableError) as info:
        LeaseTable(dynamodb, "kcl-app", "app", "orders").ensure_table()
    message = str(info.value)
    assert "'kcl-app'" in message and "leaseKey HASH" in message and "leaseTableName" in message
    ttl = boto3.client("dynamodb", region_name="us-east-1").describe_time_to_live(TableName="kcl-app")
    assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "DISABLED"  # another tool's table: untouched


def test_missing_table_is_named_with_the_fix(dynamodb: DynamoDBClient) -> None:
    leases = LeaseTable(dynamodb, "no-such-table", "app", "orders")
    with pytest.raises(LeaseTableNotFoundError, match="'no-such-table'.*ensure_table"):
        leases.ensure_table(create=False)
    with pytest.raises(LeaseTableNotFoundError, match="'no-such-table'"):
        leases.scan()
    with pytest.raises(LeaseTableNotFoundError, match="'no-such-table'"):
        leases.create_lease(lease())


def test_access_denied_names_table_and_action(dummy_credentials: None) -> None:
    client = DynamoDBClient(AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:1", retry=FAST))
    stub = Stubber(client._client)
    stub.add_response("get_item", {})  # no lease layout recorded yet (layout.py)
    stub.add_response("query", {"Items": []})  # and no leases of an earlier version
    for _ in range(2):  # the layout record, then the lease itself
        stub.add_client_error("put_item", service_error_code="AccessDeniedException", http_status_code=400,
                              service_message="User is not authorized")
    leases = LeaseTable(client, TABLE, "app", "orders")
    with stub, pytest.raises(AccessDeniedError) as info:
        leases.create_lease(lease())
    message = str(info.value)
    assert "dynamodb:PutItem" in message and repr(TABLE) in message


def test_names_are_validated_so_namespaces_cannot_collide(dynamodb: DynamoDBClient) -> None:
    with pytest.raises(ConfigurationError, match="applicationName 'a#b'"):
        LeaseTable(dynamodb, TABLE, "a#b", "orders")
    with pytest.raises(ConfigurationError, match="streamName"):
        LeaseTable(dynamodb, TABLE, "app", "orders#x")
    with pytest.raises(ConfigurationError, match="leaseTableName"):
        LeaseTable(dynamodb, "t", "app", "orders")
    assert default_table_name("orders-etl") == "kinesis-src-orders-etl"


def test_applications_and_streams_sharing_a_table_do_not_see_each_other(table: LeaseTable) -> None:
    other_app = LeaseTable(table.dynamodb, TABLE, "app2", "orders")
    other_stream = LeaseTable(table.dynamodb, TABLE, "app", "orders2")
    assert table.create_lease(lease("s-1"))
    assert other_app.create_lease(lease("s-2"))
    assert other_stream.create_lease(lease("s-3"))
    assert [l.shard_id for l in table.list_leases()] == ["s-1"]
    assert [l.shard_id for l in other_app.list_leases()] == ["s-2"]
    assert list(other_stream.scan().leases) == ["s-3"]


# -- lease codec -----------------------------------------------------------------------

checkpoints = st.one_of(
    st.sampled_from([Checkpoint.trim_horizon(), Checkpoint.latest(), Checkpoint.shard_end()]),
    st.builds(Checkpoint.sequence, st.from_regex(r"[1-9][0-9]{0,55}", fullmatch=True), st.integers(0, 2**40)),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))
    .map(lambda d: d.replace(microsecond=d.microsecond))
    .map(Checkpoint.at_timestamp),
)
shard_ids = st.from_regex(r"shardId-[0-9]{12}", fullmatch=True)


@st.composite
def leases(draw) -> Lease:
    start = draw(st.integers(0, MAX_HASH_KEY))
    return Lease(
        shard_id=draw(shard_ids),
        checkpoint=draw(checkpoints),
        hash_range=HashRange(start, draw(st.integers(start, MAX_HASH_KEY))),
        counter=draw(st.integers(0, 2**53)),
        owner=draw(st.none() | st.text(min_size=1, max_size=20)),
        parent_shard_ids=tuple(draw(st.lists(shard_ids, max_size=2))),
        child_shard_ids=tuple(draw(st.lists(shard_ids, max_size=2))),
        owner_switches_since_checkpoint=draw(st.integers(0, 1000)),
        last_updated_ms=draw(st.integers(0, 2**45)),
    )


@given(leases())
@settings(max_examples=200, deadline=None)
def test_serializer_round_trip(value: Lease) -> None:
    codec = LeaseCodec(TABLE)
    assert codec.lease(codec.lease_item("lease#app#orders", value)) == value


def _item() -> dict:
    return LeaseCodec(TABLE).lease_item("lease#app#orders", lease(owner="w1", counter=3))


@pytest.mark.parametrize(
    "attribute, edit, found",
    [
        ("leaseCounter", lambda item: item.pop("leaseCounter"), "is missing"),
        ("leaseCounter", lambda item: item.update(leaseCounter={"S": "3"}), "has type S"),
        ("checkpoint", lambda item: item.pop("checkpoint"), "is missing"),
        ("checkpoint", lambda item: item.update(checkpoint={"S": "HALFWAY"}), "is invalid"),
        ("checkpointTimestamp", lambda item: item.update(checkpoint={"S": "AT_TIMESTAMP"}), "is missing"),
        ("parentShardIds", lambda item: item.update(parentShardIds={"SS": ["a"]}), "has type SS"),
        ("childShardIds", lambda item: item.update(childShardIds={"L": [{"N": "1"}]}), "has element 0"),
        ("startingHashKey", lambda item: item.update(startingHashKey={"S": "-1"}), "is '-1'"),
        ("endingHashKey", lambda item: item.update(startingHashKey={"S": "5"}, endingHashKey={"S": "4"}), "invalid"),
        ("leaseOwner", lambda item: item.update(leaseOwner={"S": ""}), "is empty"),
        ("leaseOwner", lambda item: item.update(leaseOwner={"N": "7"}), "has type N"),
        ("shardId", lambda item: item.update(shardId={"S": "shardId-000000000009"}), "shardId-000000000009"),
        ("ownerSwitchesSinceCheckpoint", lambda item: item.update(ownerSwitchesSinceCheckpoint={"N": "x"}), "'x'"),
        ("lastUpdated", lambda item: item.pop("lastUpdated"), "is missing"),
    ],
)
def test_corrupt_lease_items_name_the_key_and_attribute(attribute: str, edit, found: str) -> None:
    item = _item()
    edit(item)
    with pytest.raises(CorruptLeaseError) as info:
        LeaseCodec(TABLE).lease(item)
    error = info.value
    assert error.attribute == attribute
    assert error.key == {"pk": "lease#app#orders", "sk": "shard#shardId-000000000000"}
    message = str(error)
    assert repr(TABLE) in message and "sk='shard#shardId-000000000000'" in message
    assert f"attribute {attribute!r}" in message and found in message


def test_a_hand_edited_item_in_the_table_fails_the_scan_not_silently(table: LeaseTable) -> None:
    table.create_lease(lease("shardId-000000000000"))
    table.create_lease(lease("shardId-000000000001"))
    plain = boto3.client("dynamodb", region_name="us-east-1")
    plain.update_item(
        TableName=TABLE, Key=table._lease_key("shardId-000000000001"), UpdateExpression="REMOVE leaseCounter"
    )
    with pytest.raises(CorruptLeaseError, match=r"shard#shardId-000000000001.*'leaseCounter' is missing"):
        table.scan()
    plain.put_item(TableName=TABLE, Item={"pk": {"S": table.partition}, "sk": {"S": "junk"}})
    plain.delete_item(TableName=TABLE, Key=table._lease_key("shardId-000000000001"))
    with pytest.raises(CorruptLeaseError, match=r"sk='junk'.*shard# or worker#"):
        table.scan()


def test_checkpoint_values_and_positions() -> None:
    assert Checkpoint.from_position(Position.after_sequence("42")) == Checkpoint.sequence("42")
    # A checkpoint names a user record: resume AT its sequence number, dropping user records through it.
    assert Checkpoint.sequence("42").resume_position() == Position.after_sequence("42", 0)
    assert Checkpoint.sequence("42", 3).resume_position() == Position.after_sequence("42", 3)
    assert Checkpoint.from_position(Position.after_sequence("42", 3)) == Checkpoint.sequence("42", 3)
    assert Checkpoint.sequence("42", 3).resume_position().iterator_args() == {
        "ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": "42"
    }
    assert Checkpoint.from_position(Position.latest()).kind is CheckpointKind.LATEST
    ts = Checkpoint.at_timestamp("2026-01-31T12:00:00Z")
    assert Checkpoint.from_position(ts.resume_position()) == ts
    assert Checkpoint.shard_end().resume_position() is None
    assert Checkpoint.sequence("1").started and Checkpoint.shard_end().started
    assert not Checkpoint.trim_horizon().started
    with pytest.raises(InvalidPositionError, match="last record processed"):
        Checkpoint.from_position(Position.at_sequence("42"))
    with pytest.raises(InvalidPositionError):
        Checkpoint.sequence("abc")
    with pytest.raises(InvalidPositionError):
        Checkpoint(CheckpointKind.TRIM_HORIZON, sub_sequence_number=2)


# -- conditional operations -----------------------------------------------------------


def test_create_is_put_if_absent(table: LeaseTable) -> None:
    assert table.create_lease(lease(parent_shard_ids=("p",)))
    assert not table.create_lease(lease(checkpoint=Checkpoint.latest()))
    stored = table.get_lease("shardId-000000000000")
    assert stored.checkpoint == Checkpoint.trim_horizon() and stored.parent_shard_ids == ("p",)
    assert stored.last_updated_ms > 0


def test_take_increments_counter_and_loses_races(table: LeaseTable) -> None:
    table.create_lease(lease())
    fresh = table.get_lease("shardId-000000000000")
    taken = table.take_lease(fresh, "w1")
    assert (taken.owner, taken.counter, taken.owner_switches_since_checkpoint) == ("w1", 1, 1)
    assert table.take_lease(fresh, "w2") is None  # stale counter and owner
    assert table.take_lease(taken.__class__(**{**taken.__dict__, "owner": "w9"}), "w2") is None
    stolen = table.steal_lease(taken, "w2")
    assert (stolen.owner, stolen.counter, stolen.owner_switches_since_checkpoint) == ("w2", 2, 2)


def test_checkpoint_only_by_the_holder_at_its_counter(table: LeaseTable) -> None:
    table.create_lease(lease())
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    after = table.checkpoint(held, Checkpoint.sequence("100", 2))
    assert after.checkpoint == Checkpoint.sequence("100", 2) and after.owner_switches_since_checkpoint == 0
    assert after.counter == held.counter
    ts = table.checkpoint(after, Checkpoint.at_timestamp("2026-01-01T00:00:00Z"))
    assert ts.checkpoint.kind is CheckpointKind.AT_TIMESTAMP
    back = table.checkpoint(ts, Checkpoint.sequence("101"))
    assert "checkpointTimestamp" not in raw_item(table, "shardId-000000000000")
    stolen = table.steal_lease(back, "w2")
    before = raw_item(table, "shardId-000000000000")
    with pytest.raises(LeaseLostError) as info:
        table.checkpoint(back, Checkpoint.sequence("200"))
    message = str(info.value)
    assert info.value.shard_id == "shardId-000000000000"
    assert "owner w1 and counter 1" in message and "owner w2, counter 2" in message and repr(TABLE) in message
    assert not info.value.retriable
    assert raw_item(table, "shardId-000000000000") == before
    assert table.checkpoint(stolen, Checkpoint.sequence("200")).checkpoint.sequence_number == "200"
    with pytest.raises(InvalidPositionError, match="mark_shard_end"):
        table.checkpoint(stolen, Checkpoint.shard_end())


def test_release_and_renew(table: LeaseTable) -> None:
    table.create_lease(lease())
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    renewed = table.renew_lease(held)
    assert renewed.counter == held.counter + 1 and table.renew_lease(held) is None
    released = table.release_lease(renewed)
    assert released.owner is None and released.counter == renewed.counter + 1
    assert table.release_lease(renewed) is None
    with pytest.raises(LeaseLostError):
        table.checkpoint(renewed, Checkpoint.sequence("1"))
    assert table.take_lease(released, "w2").owner == "w2"


def test_shard_end_creates_children_once_and_fences_the_parent(table: LeaseTable) -> None:
    left = HashRange(0, 2**127 - 1)
    table.create_lease(lease("shardId-000000000000", hash_range=left))
    table.create_lease(lease("shardId-000000000001", hash_range=HashRange(2**127, MAX_HASH_KEY)))
    a = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    b = table.take_lease(table.get_lease("shardId-000000000001"), "w2")
    child = ChildShard("shardId-000000000002", ("shardId-000000000000", "shardId-000000000001"), 0, MAX_HASH_KEY)
    first = table.mark_shard_end(a, [Lease.for_child(child)])
    assert first.created_children == ("shardId-000000000002",) and first.existing_children == ()
    ended = first.lease
    assert ended.is_shard_end and ended.owner is None and ended.counter == a.counter + 1
    assert ended.child_shard_ids == ("shardId-000000000002",)
    created = table.get_lease("shardId-000000000002")
    assert created.checkpoint == Checkpoint.trim_horizon() and created.owner is None
    assert created.parent_shard_ids == ("shardId-000000000000", "shardId-000000000001")
    second = table.mark_shard_end(b, [Lease.for_child(child)])
    assert second.created_children == () and second.existing_children == ("shardId-000000000002",)
    assert table.get_lease("shardId-000000000002") == created
    with pytest.raises(LeaseLostError):
        table.mark_shard_end(a, [])


def test_delete_lease_conditions(table: LeaseTable) -> None:
    table.create_lease(lease())
    current = table.get_lease("shardId-000000000000")
    assert not table.delete_lease(current, only_if_shard_end=True)
    held = table.take_lease(current, "w1")
    assert not table.delete_lease(current, only_if_shard_end=False)  # counter moved on
    ended = table.mark_shard_end(held, []).lease
    assert table.delete_lease(ended, only_if_shard_end=True)
    assert table.get_lease("shardId-000000000000") is None


def test_heartbeats_renew_and_detect_takeover(table: LeaseTable) -> None:
    me = table.register_worker("w1")
    status, me2 = table.heartbeat(me)
    assert status is HeartbeatStatus.RENEWED and me2.heartbeat == 1
    status, me3 = table.heartbeat(me)  # every write moves the stored value, whatever copy it was sent with
    assert status is HeartbeatStatus.RENEWED and me3.heartbeat == 2
    view = table.scan()
    assert view.workers["w1"].heartbeat == 2 and view.workers["w1"].session == me.session
    assert not table.declare_worker_dead(me2)  # stale observation: heartbeat moved on
    assert table.declare_worker_dead(me3)
    assert table.heartbeat(me3)[0] is HeartbeatStatus.DECLARED_DEAD
    newer = table.register_worker("w1")
    assert table.heartbeat(me3)[0] is HeartbeatStatus.REPLACED
    assert table.heartbeat(newer)[0] is HeartbeatStatus.RENEWED
    assert not table.deregister_worker(me3) and table.deregister_worker(newer)
    assert table.scan().workers == {}


def test_requests_are_counted_per_operation(table: LeaseTable) -> None:
    table.ensure_layout()  # recorded once per application+stream (layout.py)
    before = table.dynamodb.request_total()
    table.create_lease(lease())
    table.scan()
    assert table.dynamodb.request_total() - before == 2
    assert table.dynamodb.requests["PutItem"] >= 1 and table.dynamodb.requests["Query"] >= 1


# -- retries after a lost response, fencing of child creation --------------------------


class LoseResponses:
    """Drop the response of the next ``count`` calls of ``operations`` after DynamoDB applied them.

    The client sees a connection reset and retries, as after a network failure
    between DynamoDB's write and our read of its answer.
    """

    def __init__(self, dynamodb: DynamoDBClient, operations: tuple[str, ...], count: int = 1) -> None:
        self.operations, self.remaining, self.lost = operations, count, 0
        dynamodb._client.meta.events.register("after-call.dynamodb", self)

    def __call__(self, model, **_) -> None:
        if model.name in self.operations and self.remaining > 0:
            self.remaining -= 1
            self.lost += 1
            raise ConnectionClosedError(endpoint_url="http://lost-response")


def test_a_heartbeat_retried_after_a_lost_response_advances_again(table: LeaseTable) -> None:
    me = table.register_worker("w1")
    lose = LoseResponses(table.dynamodb, ("UpdateItem",))
    status, after = table.heartbeat(me)
    assert lose.lost == 1 and status is HeartbeatStatus.RENEWED
    stored = table.scan().workers["w1"]
    assert stored.heartbeat == 2  # the landed write and its retry each changed the value others watch
    assert after.heartbeat == stored.heartbeat and after.session == me.session


def test_a_retried_shard_end_whose_first_attempt_landed_succeeds(table: LeaseTable) -> None:
    table.create_lease(lease("shardId-000000000000"))
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    children = [Lease.for_child(ChildShard("shardId-000000000001", ("shardId-000000000000",), 0, 2**127 - 1)),
                Lease.for_child(ChildShard("shardId-000000000002", ("shardId-000000000000",), 2**127, MAX_HASH_KEY))]
    first = table.mark_shard_end(held, children)
    again = table.mark_shard_end(held, children)  # the caller retries: the first attempt had landed
    assert again.lease == first.lease and again.lease.counter == held.counter + 1
    assert set(again.existing_children) == {"shardId-000000000001", "shardId-000000000002"}
    with pytest.raises(LeaseLostError):  # different children: not our own landed write
        table.mark_shard_end(held, children[:1])


def test_a_shard_end_whose_response_was_lost_succeeds_on_the_client_retry(table: LeaseTable) -> None:
    table.create_lease(lease("shardId-000000000000"))
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    child = Lease.for_child(ChildShard("shardId-000000000001", ("shardId-000000000000",), 0, MAX_HASH_KEY))
    lose = LoseResponses(table.dynamodb, ("UpdateItem", "TransactWriteItems"))
    result = table.mark_shard_end(held, [child])
    assert lose.lost == 1
    assert result.lease.is_shard_end and result.lease.counter == held.counter + 1
    assert table.get_lease("shardId-000000000000") == result.lease
    assert table.get_lease("shardId-000000000001").checkpoint == Checkpoint.trim_horizon()


def test_a_zombie_with_a_stale_counter_cannot_create_a_child_lease(table: LeaseTable) -> None:
    parent, child_id = "shardId-000000000000", "shardId-000000000001"
    child = Lease.for_child(ChildShard(child_id, (parent,), 0, MAX_HASH_KEY))
    table.create_lease(lease(parent))
    zombie = table.take_lease(table.get_lease(parent), "zombie")
    successor = table.steal_lease(zombie, "w2")  # the zombie paused; w2 took over
    ended = table.mark_shard_end(successor, [child]).lease
    # the child was read to its end and shard sync cleaned up both generations
    assert table.delete_lease(ended, only_if_shard_end=True)
    assert table.delete_lease(table.get_lease(child_id), only_if_shard_end=False)
    with pytest.raises(LeaseLostError):
        table.mark_shard_end(zombie, [child])
    assert table.get_lease(child_id) is None  # not recreated at TRIM_HORIZON
    assert table.get_lease(parent) is None


def test_shard_end_creates_the_missing_child_when_the_other_exists(table: LeaseTable) -> None:
    table.create_lease(lease("shardId-000000000000"))
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    low = Lease.for_child(ChildShard("shardId-000000000001", ("shardId-000000000000",), 0, 2**127 - 1))
    high = Lease.for_child(ChildShard("shardId-000000000002", ("shardId-000000000000",), 2**127, MAX_HASH_KEY))
    assert table.create_lease(high)  # e.g. shard sync listed it first
    result = table.mark_shard_end(held, [low, high])
    assert result.created_children == ("shardId-000000000001",)
    assert result.existing_children == ("shardId-000000000002",)
    assert result.lease.child_shard_ids == ("shardId-000000000001", "shardId-000000000002")
    assert table.get_lease("shardId-000000000001") is not None


def test_transaction_in_progress_is_retried(dummy_credentials: None) -> None:
    client = DynamoDBClient(AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:1", retry=FAST))
    stub = Stubber(client._client)
    stub.add_client_error("transact_write_items", service_error_code="TransactionInProgressException",
                          http_status_code=400, service_message="Transaction is ongoing for the item")
    stub.add_response("transact_write_items", {})
    put = {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "b"}}}}
    with stub:
        outcome = client.transact_write(TABLE, [put])
    assert outcome.committed
    stub.assert_no_pending_responses()


def test_ensure_table_enables_ttl_on_an_existing_table_without_it(dynamodb: DynamoDBClient) -> None:
    plain = boto3.client("dynamodb", region_name="us-east-1")
    plain.create_table(  # its creator died between CreateTable and UpdateTimeToLive
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert LeaseTable(dynamodb, TABLE, "app", "orders").ensure_table() is False
    ttl = plain.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "ENABLED" and ttl["AttributeName"] == "ttl"


def test_heartbeat_ttl_follows_server_time_not_a_wrong_wall_clock(table: LeaseTable) -> None:
    table.now_ms = lambda: 0  # this host's wall clock says 1970
    server_now = time.time()  # moto answers with this machine's real time in its Date header
    me = table.register_worker("w1")
    key = {"pk": {"S": table.partition}, "sk": {"S": "worker#w1"}}
    plain = boto3.client("dynamodb", region_name="us-east-1")
    registered = int(plain.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]["ttl"]["N"])
    table.heartbeat(me)
    renewed = int(plain.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]["ttl"]["N"])
    for ttl in (registered, renewed):
        assert ttl >= server_now + 23 * 3600  # a day ahead of the server, not in its past


def test_a_heartbeat_announces_ownership_changes_and_list_workers_reads_only_heartbeats(table: LeaseTable) -> None:
    table.create_lease(lease())
    me = table.register_worker("w1")
    status, me = table.heartbeat(me)
    assert status is HeartbeatStatus.RENEWED and me.changes == 0 and me.heartbeat == 1
    status, me = table.heartbeat(me, changed=True)
    assert (me.heartbeat, me.changes) == (2, 1)
    assert table.list_workers() == {"w1": me} == dict(table.scan().workers)
    before = table.dynamodb.requests["Query"]
    table.list_workers()
    assert table.dynamodb.requests["Query"] == before + 1


def test_the_lease_partition_holds_only_what_the_previous_version_reads(table: LeaseTable) -> None:
    """The previous version's scan accepts shard# and worker# sort keys only, and reads named
    attributes: a heartbeat's leaseChanges is one it ignores, and no new item type was added."""
    table.create_lease(lease())
    me = table.register_worker("w1")
    table.heartbeat(me, changed=True)
    taken = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    table.checkpoint(taken, Checkpoint.sequence("1"))
    items = table.dynamodb.query(TABLE, "pk", table.partition)
    assert sorted(i["sk"]["S"] for i in items) == ["shard#shardId-000000000000", "worker#w1"]
    worker = next(i for i in items if i["sk"]["S"] == "worker#w1")
    assert set(worker) == {"pk", "sk", "workerId", "session", "heartbeat", "lastUpdated", "ttl", "leaseChanges"}


def test_consumed_capacity_is_asked_for_and_summed_only_when_measured(dummy_credentials: None) -> None:
    with mock_aws():
        for measured in (False, True):
            client = DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST), measure_capacity=measured)
            leases = LeaseTable(client, TABLE, "app", f"orders{int(measured)}")
            leases.ensure_table()
            leases.ensure_layout()
            sent: list[str | None] = []
            client._client.meta.events.register(
                "before-call.dynamodb",
                lambda params, sent=sent, **_: sent.append(json.loads(params["body"]).get("ReturnConsumedCapacity")),
            )
            leases.create_lease(lease())
            leases.scan()
            assert sent == (["TOTAL", "TOTAL"] if measured else [None, None])
    meter = client.capacity
    meter.note("after-call.dynamodb.TransactWriteItems", {"ConsumedCapacity": [{"CapacityUnits": 4.0}, {"CapacityUnits": 2.0}]})
    meter.note("after-call.dynamodb.Query", {"ConsumedCapacity": {"CapacityUnits": 0.5}})
    meter.note("after-call.dynamodb.DescribeTable", {})
    assert meter.by_operation["TransactWriteItems"] == 6.0 and meter.by_operation["Query"] >= 0.5


def test_a_checkpoint_carries_the_throughput_estimate_and_older_items_have_none(table: LeaseTable) -> None:
    from kinesis_src.leases.model import Throughput

    table.create_lease(lease())
    held = table.take_lease(table.get_lease("shardId-000000000000"), "w1")
    assert held.throughput is None  # an item of the previous version's layout: no estimate
    estimate = Throughput(123.456, 98765.4, 1_700_000_000_000)
    after = table.checkpoint(held, Checkpoint.sequence("7"), estimate)
    assert after.throughput == estimate == table.get_lease("shardId-000000000000").throughput
    plain = table.checkpoint(after, Checkpoint.sequence("8"))  # without one, the last estimate stays
    assert plain.throughput == estimate and plain.checkpoint == Checkpoint.sequence("8")
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=TABLE, Key=table._lease_key("shardId-000000000000"),
        UpdateExpression="SET throughputRecords = :s", ExpressionAttributeValues={":s": {"S": "fast"}},
    )
    with pytest.raises(CorruptLeaseError, match="'throughputRecords' has type S"):
        table.get_lease("shardId-000000000000")


def test_a_scoped_table_keeps_its_leases_apart_from_the_streams_ordinary_leases() -> None:
    from kinesis_src.leases.schema.keys import lease_partition

    assert lease_partition("app", "s") == "lease#app#s"
    assert lease_partition("app", "s", "0-99") == "lease#app#s#0-99"
    with pytest.raises(ValueError, match="lease scope"):
        LeaseTable(None, "kinesis-src-app", "app", "s", scope="a#b")  # type: ignore[arg-type]


def test_the_fast_decode_path_reads_the_same_leases_and_rejects_the_same_items() -> None:
    # LeaseCodec._typed checks botocore's plain dicts with type() (issue #12: isinstance against
    # typing.Mapping was most of decoding); any other mapping takes the checked path, same result
    from types import MappingProxyType

    codec = LeaseCodec(TABLE)
    item = codec.lease_item("lease#app#orders", lease(owner="w1", counter=3, parent_shard_ids=("shardId-000000000009",)))
    proxied = MappingProxyType({k: MappingProxyType(v) if k != "parentShardIds" else
                                MappingProxyType({"L": [MappingProxyType(e) for e in v["L"]]}) for k, v in item.items()})
    assert codec.lease(proxied) == codec.lease(item)  # type: ignore[arg-type]
    for attribute, bad in (("leaseCounter", {"N": "3", "S": "3"}), ("leaseCounter", {"S": "3"}),
                           ("parentShardIds", {"L": [{"S": "a", "N": "1"}]}), ("shardId", ["x"])):
        with pytest.raises(CorruptLeaseError, match=attribute):
            codec.lease({**item, attribute: bad})
