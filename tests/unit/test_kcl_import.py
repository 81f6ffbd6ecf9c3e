"""The KCL import on moto's DynamoDB and a canned stream: the mapping, what is skipped, and every refusal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Callable

import boto3
import pytest
from fake_kinesis import FakeKinesis
from shard_listing import shard, sid  # tests/shard_listing.py
from moto import mock_aws

from kinesis_src.aws.dynamodb_scan import ScanningDynamoDBClient
from kinesis_src.cli import main
from kinesis_src.config import AwsSettings
from kinesis_src.leases import (
    ImportAction,
    ImportTargetInUseError,
    KclApplicationRunningError,
    KclImportError,
    KclStreamMismatchError,
    NotAKclLeaseTableError,
)
from kinesis_src.leases.kcl_import import KclImport
from kinesis_src.leases.model import Checkpoint, CheckpointKind, Lease
from kinesis_src.leases.shard_sync import ShardSync
from kinesis_src.leases.table import LeaseTable
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
HALF, QUARTER = 2**127, 2**126
KCL = "kcl-orders-app"
CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


# 0 split into 2 and 3; 3 merged with 1 into 4
SPLIT_AND_MERGE = [
    shard(0, 0, HALF - 1, closed=True),
    shard(1, HALF, MAX_HASH_KEY, closed=True),
    shard(2, 0, QUARTER - 1, (0,)),
    shard(3, QUARTER, HALF - 1, (0,), closed=True),
    shard(4, QUARTER, MAX_HASH_KEY, (1, 3)),
]
RANGES = {i: (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
          for i, s in enumerate(SPLIT_AND_MERGE)}
PARENTS = {0: (), 1: (), 2: (0,), 3: (0,), 4: (1, 3)}


def kcl_item(i: int, checkpoint: str, counter: int = 7, owner: str | None = None, sub: int = 0,
             children: tuple[int, ...] = (), key: str | None = None, **extra: dict[str, Any]) -> dict[str, Any]:
    """A KCL 3.x lease item as DynamoDBLeaseSerializer writes it."""
    lo, hi = RANGES.get(i, (0, MAX_HASH_KEY))
    item: dict[str, Any] = {
        "leaseKey": {"S": key or sid(i)}, "leaseCounter": {"N": str(counter)},
        "checkpoint": {"S": checkpoint}, "checkpointSubSequenceNumber": {"N": str(sub)},
        "ownerSwitchesSinceCheckpoint": {"N": "0"}, "entityType": {"S": "LEASE"},
        "startingHashKey": {"S": str(lo)}, "endingHashKey": {"S": str(hi)},
    }
    if PARENTS.get(i):
        item["parentShardId"] = {"SS": [sid(p) for p in PARENTS[i]]}
    if children:
        item["childShardIds"] = {"SS": [sid(c) for c in children]}
    if owner:
        item["leaseOwner"] = {"S": owner}
    item.update(extra)
    return item


NON_LEASES = [
    {"leaseKey": {"S": "worker-a"}, "entityType": {"S": "WORKER_METRIC_STATS"}, "lastUpdateTime": {"N": "1"}},
    {"leaseKey": {"S": "Leader"}, "ownerName": {"S": "worker-a"}, "leaseDuration": {"S": "120000"}},
    {"leaseKey": {"S": "Migration3.0"}, "entityType": {"S": "CLIENT_VERSION_MIGRATION"}},
]


def kcl_table_items() -> list[dict[str, Any]]:
    """A stopped KCL app on SPLIT_AND_MERGE: 0 and 3 finished, 1 part-way, 2 and 4 untouched."""
    return [
        kcl_item(0, "SHARD_END", children=(2, 3)),
        kcl_item(1, "250", sub=3, owner="worker-a"),
        kcl_item(2, "TRIM_HORIZON"),
        kcl_item(3, "SHARD_END", children=(4,)),
        kcl_item(4, "LATEST", pendingCheckpoint={"S": "510"}),
        *NON_LEASES,
    ]


class World:
    """moto DynamoDB + a canned stream "orders"; ``job()`` builds an import whose wait runs ``between``."""

    def __init__(self) -> None:
        self.ddb = boto3.client("dynamodb", region_name="us-east-1")
        self.dynamodb = ScanningDynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))
        self.kinesis = FakeKinesis()
        self.kinesis.create_stream("orders", listing=SPLIT_AND_MERGE, created=CREATED)
        self.between: Callable[[], None] = lambda: None
        self.waited: list[float] = []

    def kcl_table(self, items: list[dict[str, Any]], name: str = KCL) -> None:
        self.ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        for item in items:
            self.ddb.put_item(TableName=name, Item=item)

    def kcl_items(self, name: str = KCL) -> list[dict[str, Any]]:
        return sorted(self.ddb.scan(TableName=name, ConsistentRead=True)["Items"], key=lambda i: i["leaseKey"]["S"])

    def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        self.between()

    def job(self, application: str = "app", **kwargs: Any) -> KclImport:
        return KclImport(self.dynamodb, self.kinesis, KCL, "orders", application, observe_s=3.0,  # type: ignore[arg-type]
                         sleep=self.sleep, **kwargs)

    def ours(self, application: str = "app") -> LeaseTable:
        return LeaseTable(self.dynamodb, f"kinesis-src-{application}", application, "orders")


@pytest.fixture
def world(dummy_credentials: None):
    with mock_aws():
        yield World()


def leases_of(table: LeaseTable) -> dict[str, Lease]:
    return {lease.shard_id: lease for lease in table.list_leases()}


# -- the mapping ----------------------------------------------------------------------------------


def test_checkpoints_shard_end_and_parents_are_carried_over_and_non_leases_skipped(world: World) -> None:
    world.kcl_table(kcl_table_items())
    report = world.job().run()

    leases = leases_of(world.ours())
    assert leases[sid(0)].checkpoint == Checkpoint.shard_end()
    assert leases[sid(0)].child_shard_ids == (sid(2), sid(3))
    assert leases[sid(1)].checkpoint == Checkpoint.sequence("250", 3)  # sub-sequence kept: resumes after 250/3
    assert leases[sid(2)].checkpoint == Checkpoint.trim_horizon()
    assert leases[sid(3)].checkpoint == Checkpoint.shard_end() and leases[sid(3)].child_shard_ids == (sid(4),)
    assert leases[sid(4)].checkpoint == Checkpoint.trim_horizon()  # LATEST: nothing processed, nothing skipped
    assert leases[sid(4)].parent_shard_ids == (sid(1), sid(3))
    assert leases[sid(4)].hash_range == HashRange(*RANGES[4])
    assert all(lease.owner is None and lease.counter == 0 for lease in leases.values())

    assert report.created == tuple(sid(i) for i in range(5)) and not report.dry_run
    assert {s.shard_id: s.action for s in report.shards} == {sid(i): ImportAction.IMPORT for i in range(5)}
    assert sorted((s.key, s.what) for s in report.skipped_items) == [
        ("Leader", "KCL leader lock"), ("Migration3.0", "KCL CLIENT_VERSION_MIGRATION item"),
        ("worker-a", "KCL WORKER_METRIC_STATS item"),
    ]
    note = next(s.note for s in report.shards if s.shard_id == sid(4))
    assert "LATEST" in note and "pending checkpoint 510" in note
    assert world.waited == [3.0]  # the table was read twice, observe_s apart
    assert report.left_to_shard_sync == ()


def test_unstarted_shards_can_start_at_a_timestamp(world: World) -> None:
    world.kcl_table([*kcl_table_items()[:4], kcl_item(4, "AT_TIMESTAMP")])
    when = datetime(2026, 3, 1, tzinfo=UTC)
    world.job(unstarted=Checkpoint.at_timestamp(when)).run()
    leases = leases_of(world.ours())
    assert leases[sid(4)].checkpoint == Checkpoint.at_timestamp(when)
    assert leases[sid(2)].checkpoint == Checkpoint.trim_horizon()  # KCL's own TRIM_HORIZON stays


def test_dry_run_writes_nothing_anywhere(world: World) -> None:
    world.kcl_table(kcl_table_items())
    before = world.kcl_items()
    report = world.job().run(dry_run=True)
    assert report.dry_run and report.created == ()
    assert [s.checkpoint for s in report.shards][1] == Checkpoint.sequence("250", 3)
    assert world.dynamodb.describe_table("kinesis-src-app") is None
    assert world.kcl_items() == before


def test_the_kcl_table_is_only_read(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.kcl_table(kcl_table_items())
    before = world.kcl_items()
    written: list[str] = []
    for name in ("put_item", "update_item", "delete_item", "transact_write", "batch_delete"):
        original = getattr(world.dynamodb, name)

        def spy(table: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            written.append(table)
            return _original(table, *args, **kwargs)

        monkeypatch.setattr(world.dynamodb, name, spy)
    admin = world.dynamodb.admin

    def admin_spy(operation: str, table: str, *args: Any, **kwargs: Any) -> Any:
        if not operation.startswith("Describe"):  # CreateTable, UpdateTimeToLive, DeleteTable
            written.append(table)
        return admin(operation, table, *args, **kwargs)

    monkeypatch.setattr(world.dynamodb, "admin", admin_spy)
    world.job().run()
    assert written and KCL not in written
    assert set(written) == {"kinesis-src-app"}
    assert world.kcl_items() == before


def test_shards_without_a_kcl_lease_are_left_to_the_shard_sync_at_trim_horizon(world: World) -> None:
    """KCL stopped before the reshard: it knew shards 0 and 1 only. The children come from our shard sync."""
    world.kcl_table([kcl_item(0, "150"), kcl_item(1, "260", sub=1)])
    report = world.job().run()
    assert report.left_to_shard_sync == (sid(2), sid(3), sid(4))
    table = world.ours()
    sync = ShardSync(world.kinesis, table).run()  # type: ignore[arg-type]
    assert sync.created == (sid(2), sid(3), sid(4))
    leases = leases_of(table)
    assert leases[sid(0)].checkpoint == Checkpoint.sequence("150")
    assert {leases[sid(i)].checkpoint.kind for i in (2, 3, 4)} == {CheckpointKind.TRIM_HORIZON}


def test_a_trimmed_shard_is_reported_not_imported(world: World) -> None:
    world.kinesis.set_listing("orders", SPLIT_AND_MERGE[1:])  # shard 0 trimmed past retention
    world.kcl_table([kcl_item(0, "SHARD_END", children=(2, 3)), *kcl_table_items()[1:5]])
    report = world.job().run()
    first = report.shards[0]
    assert (first.shard_id, first.action, first.checkpoint) == (sid(0), ImportAction.TRIMMED, None)
    assert sid(0) not in leases_of(world.ours()) and sid(0) not in report.created


def test_an_interrupted_import_is_completed_and_a_second_run_adds_nothing(world: World) -> None:
    world.kcl_table(kcl_table_items())
    world.ours().ensure_table()
    world.ours().create_lease(Lease(sid(0), Checkpoint.shard_end(), HashRange(*RANGES[0]),
                                    child_shard_ids=(sid(2), sid(3))))
    report = world.job().run()
    assert report.created == tuple(sid(i) for i in range(1, 5))
    assert report.shards[0].action is ImportAction.PRESENT
    again = world.job().run()
    assert again.created == () and {s.action for s in again.shards} == {ImportAction.PRESENT}


def test_multi_stream_tables_import_the_named_streams_leases(world: World) -> None:
    epoch = int(CREATED.timestamp())
    ours, other = f"000000000000:orders:{epoch}", f"000000000000:payments:{epoch}"
    items = [kcl_item(i, "SHARD_END" if i in (0, 3) else "TRIM_HORIZON", key=f"{ours}:{sid(i)}",
                      streamName={"S": ours}, shardId={"S": sid(i)}) for i in range(5)]
    items.append(kcl_item(0, "999", key=f"{other}:{sid(0)}", streamName={"S": other}, shardId={"S": sid(0)}))
    world.kcl_table(items)
    report = world.job().run()
    assert report.created == tuple(sid(i) for i in range(5))
    assert leases_of(world.ours())[sid(0)].checkpoint == Checkpoint.shard_end()


# -- refusals ------------------------------------------------------------------------------------


def assert_nothing_written(world: World) -> None:
    assert world.dynamodb.describe_table("kinesis-src-app") is None


def test_a_missing_table_is_refused(world: World) -> None:
    with pytest.raises(KclImportError, match=f"KCL table '{KCL}' does not exist"):
        world.job().run()


def test_a_table_with_another_key_schema_is_refused(world: World) -> None:
    LeaseTable(world.dynamodb, KCL, "x", "orders").ensure_table()  # a kinesis-src lease table (pk, sk)
    with pytest.raises(NotAKclLeaseTableError, match=r"\[pk HASH \(S\), sk RANGE \(S\)\].*\[leaseKey HASH \(S\)\]"):
        world.job().run()
    assert_nothing_written(world)


def test_a_table_without_leases_or_with_malformed_ones_is_refused(world: World) -> None:
    world.kcl_table(NON_LEASES)
    with pytest.raises(NotAKclLeaseTableError, match="holds no KCL lease"):
        world.job().run()
    bad = kcl_item(1, "250")
    del bad["leaseCounter"]
    world.ddb.put_item(TableName=KCL, Item=bad)
    with pytest.raises(NotAKclLeaseTableError, match=f"leaseKey='{sid(1)}'.*'leaseCounter'.*missing"):
        world.job().run()
    world.ddb.put_item(TableName=KCL, Item=kcl_item(1, "not-a-position"))
    with pytest.raises(NotAKclLeaseTableError, match="'checkpoint'"):
        world.job().run()
    assert_nothing_written(world)


def test_a_running_kcl_application_is_refused(world: World) -> None:
    world.kcl_table(kcl_table_items())
    renewed = kcl_item(1, "250", sub=3, owner="worker-a", counter=8)  # the holder renewed during the watch
    world.between = lambda: world.ddb.put_item(TableName=KCL, Item=renewed)
    with pytest.raises(KclApplicationRunningError, match=rf"still running.*{sid(1)} leaseCounter 7 -> 8, owner worker-a"):
        world.job().run()
    assert_nothing_written(world)


def test_a_lease_created_while_watching_means_running(world: World) -> None:
    world.kcl_table(kcl_table_items()[:4])
    world.between = lambda: world.ddb.put_item(TableName=KCL, Item=kcl_item(4, "TRIM_HORIZON"))
    with pytest.raises(KclApplicationRunningError, match=f"{sid(4)} created"):
        world.job().run()


@pytest.mark.parametrize("items, expected", [
    ([kcl_item(0, "SHARD_END"), kcl_item(9, "TRIM_HORIZON")], f"{sid(9)} is not a shard of the stream"),
    ([kcl_item(2, "TRIM_HORIZON", startingHashKey={"S": "5"})], f"{sid(2)} covers hash keys 5-"),
    ([kcl_item(2, "TRIM_HORIZON", parentShardId={"SS": [sid(1)]})], rf"{sid(2)} has parents \[{sid(1)}\] there"),
    ([kcl_item(1, "999")], f"{sid(1)}'s checkpoint 999 is outside"),
], ids=["unknown-shard", "hash-range", "parents", "sequence-number"])
def test_a_single_stream_table_of_another_stream_is_refused(world: World, items: list, expected: str) -> None:
    world.kcl_table(items)
    with pytest.raises(KclStreamMismatchError, match=expected):
        world.job().run()
    assert_nothing_written(world)


def test_a_table_naming_no_shard_of_the_stream_is_refused(world: World) -> None:
    world.kinesis.set_listing("orders", SPLIT_AND_MERGE[2:])  # 0 and 1 trimmed
    world.kcl_table([kcl_item(0, "SHARD_END"), kcl_item(1, "SHARD_END")])
    with pytest.raises(KclStreamMismatchError, match="none of its 2 lease"):
        world.job().run()


def test_a_multi_stream_table_of_other_streams_or_a_recreated_one_is_refused(world: World) -> None:
    epoch = int(CREATED.timestamp())
    other = f"000000000000:payments:{epoch}"
    world.kcl_table([kcl_item(0, "1", key=f"{other}:{sid(0)}", streamName={"S": other})])
    with pytest.raises(KclStreamMismatchError, match="leases for 000000000000:payments:.*none for stream 'orders'"):
        world.job().run()
    old = f"000000000000:orders:{epoch - 3600}"
    world.ddb.put_item(TableName=KCL, Item=kcl_item(0, "1", key=f"{old}:{sid(0)}", streamName={"S": old}))
    with pytest.raises(KclStreamMismatchError, match="deleted and created again"):
        world.job().run()


def test_a_target_with_other_leases_of_the_application_is_refused(world: World) -> None:
    world.kcl_table(kcl_table_items())
    world.ours().ensure_table()
    ShardSync(world.kinesis, world.ours()).run()  # type: ignore[arg-type]  # the application ran already
    with pytest.raises(ImportTargetInUseError, match="already holds leases of application 'app'"):
        world.job().run()
    with pytest.raises(ImportTargetInUseError):
        world.job().run(dry_run=True)


def test_the_kcl_table_as_target_is_refused(world: World) -> None:
    with pytest.raises(KclImportError, match="is the KCL table itself"):
        world.job(lease_table_name=KCL)


# -- the command -------------------------------------------------------------------------------


@pytest.fixture
def moto_stream(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch):
    """moto's Kinesis and DynamoDB: stream "orders" with 2 shards, one record each."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        kinesis.create_stream(StreamName="orders", ShardCount=2)
        shards = kinesis.list_shards(StreamName="orders")["Shards"]
        sequences = {}
        for s in shards:
            put = kinesis.put_record(StreamName="orders", Data=b"x", PartitionKey="k",
                                     ExplicitHashKey=s["HashKeyRange"]["StartingHashKey"])
            sequences[put["ShardId"]] = put["SequenceNumber"]
        yield shards, sequences


def test_the_command_shows_a_dry_run_then_imports(moto_stream: Any, capsys: pytest.CaptureFixture[str]) -> None:
    shards, sequences = moto_stream
    world = World.__new__(World)
    world.ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = []
    for s in shards:
        lo, hi = s["HashKeyRange"]["StartingHashKey"], s["HashKeyRange"]["EndingHashKey"]
        items.append({"leaseKey": {"S": s["ShardId"]}, "leaseCounter": {"N": "3"},
                      "checkpoint": {"S": sequences[s["ShardId"]]}, "checkpointSubSequenceNumber": {"N": "0"},
                      "startingHashKey": {"S": lo}, "endingHashKey": {"S": hi}})
    World.kcl_table(world, [*items, NON_LEASES[1]])
    args = ["leases", "import-kcl", "--kcl-table", KCL, "--stream", "orders", "--application", "app",
            "--observe-s", "0.01"]

    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run, nothing written" in out and "would create 2 lease(s)" in out
    assert "skipped 1 non-lease item(s): KCL leader lock (Leader)" in out
    assert sequences[shards[0]["ShardId"]] in out

    assert main(args) == 0
    assert "created 2 lease(s)" in capsys.readouterr().out
    assert main(args) == 0  # again: nothing new
    assert "created 0 lease(s) (2 already there)" in capsys.readouterr().out


def test_the_command_reports_a_refusal_on_stderr(moto_stream: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["leases", "import-kcl", "--kcl-table", KCL, "--stream", "orders", "--application", "app",
                 "--observe-s", "0.01", "--json"])
    assert code == 2
    assert f"kinesis-src: KCL table '{KCL}' does not exist" in capsys.readouterr().err


def test_an_ending_sequence_number_below_the_start_bounds_nothing(world: World) -> None:
    """kinesis-mock lists a closed shard's EndingSequenceNumber as 2**63-1, below its real numbers: ignored."""
    listing = [dict(s) for s in SPLIT_AND_MERGE]
    listing[1] = {**listing[1], "SequenceNumberRange": {"StartingSequenceNumber": "200",
                                                         "EndingSequenceNumber": "150"}}
    world.kinesis.set_listing("orders", listing)
    world.kcl_table([kcl_item(0, "SHARD_END", children=(2, 3)), kcl_item(1, "260")])
    world.job().run()
    assert leases_of(world.ours())[sid(1)].checkpoint == Checkpoint.sequence("260")
    world.kcl_table([kcl_item(1, "199")], name="kcl-too-low")
    with pytest.raises(KclStreamMismatchError, match="checkpoint 199 is outside"):
        KclImport(world.dynamodb, world.kinesis, "kcl-too-low", "orders", "app2", observe_s=1.0,  # type: ignore[arg-type]
                  sleep=world.sleep).run()


def test_a_kcl_2x_table_is_read_the_same(world: World) -> None:
    """KCL 2.x items: no entityType, and early 2.x releases named the children ``childShardId``."""
    items = [kcl_item(0, "SHARD_END"), kcl_item(1, "250"), kcl_item(3, "SHARD_END")]
    for item in items:
        del item["entityType"]
    items[0]["childShardId"] = {"SS": [sid(3), sid(2)]}
    world.kcl_table(items)
    report = world.job().run()
    leases = leases_of(world.ours())
    assert leases[sid(0)].child_shard_ids == (sid(2), sid(3)) and leases[sid(1)].checkpoint == Checkpoint.sequence("250")
    assert report.skipped_items == () and report.left_to_shard_sync == (sid(2), sid(4))


def test_a_table_of_another_stream_fails_before_the_wait(world: World) -> None:
    world.kcl_table([kcl_item(9, "TRIM_HORIZON")])
    with pytest.raises(KclStreamMismatchError):
        world.job().run()
    assert world.waited == []
