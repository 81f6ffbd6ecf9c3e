"""ShardSync against canned ListShards listings and a moto lease table."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from fake_kinesis import FakeKinesis
from shard_listing import shard, sid  # tests/shard_listing.py
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.leases.assignment import plan_assignment
from kinesis_src.leases.model import Checkpoint, CheckpointKind, Lease
from kinesis_src.leases.shard_sync import ShardSync
from kinesis_src.leases.table import LeaseTable
from kinesis_src.positions import Position
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
HALF = 2**127


def listed(shards: list[dict]) -> FakeKinesis:
    """Stream "orders" listing ``shards``, ShardFilter ignored (as moto does): every sync sees the whole
    listing, so the sync's own choice of shards is what is tested. ``set_listing`` replaces it."""
    fake = FakeKinesis()
    fake.create_stream("orders", listing=shards)
    fake.shard_filter = "ignored"
    return fake


# shard 0 split into 1 and 2; 2 split into 3 and 4
SPLIT_TWICE = [
    shard(0, 0, MAX_HASH_KEY, closed=True),
    shard(1, 0, HALF - 1, (0,)),
    shard(2, HALF, MAX_HASH_KEY, (0,), closed=True),
    shard(3, HALF, HALF + 2**126 - 1, (2,)),
    shard(4, HALF + 2**126, MAX_HASH_KEY, (2,)),
]


SPLIT_ONCE = [*SPLIT_TWICE[:2], shard(2, HALF, MAX_HASH_KEY, (0,))]


@pytest.fixture
def table(dummy_credentials: None):
    with mock_aws():
        leases = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST)), "sync-unit", "app", "orders")
        leases.ensure_table()
        yield leases


def leases_of(table: LeaseTable) -> dict[str, Lease]:
    return {l.shard_id: l for l in table.list_leases()}


def assignable(table: LeaseTable) -> list[str]:
    return [l.shard_id for l in plan_assignment("w", table.list_leases(), ["w"]).take]


def test_fresh_table_at_trim_horizon_leases_every_shard_parent_first(table: LeaseTable) -> None:
    sync = ShardSync(listed(SPLIT_TWICE), table)
    report = sync.run()
    assert report.created == tuple(sid(i) for i in range(5))
    leases = leases_of(table)
    assert all(l.checkpoint == Checkpoint.trim_horizon() for l in leases.values())
    assert leases[sid(3)].parent_shard_ids == (sid(2),) and leases[sid(3)].hash_range == HashRange(HALF, HALF + 2**126 - 1)
    assert assignable(table) == [sid(0)]
    assert not sync.run().changed  # idempotent


def test_fresh_table_at_latest_leases_open_shards_only_and_later_children_at_trim_horizon(table: LeaseTable) -> None:
    kinesis = listed(SPLIT_TWICE)
    ShardSync(kinesis, table, Position.latest()).run()
    leases = leases_of(table)
    assert sorted(leases) == [sid(1), sid(3), sid(4)]
    assert all(l.checkpoint.kind is CheckpointKind.AT_TIMESTAMP for l in leases.values())
    kinesis.set_listing("orders", [*SPLIT_TWICE[:1], shard(1, 0, HALF - 1, (0,), closed=True), *SPLIT_TWICE[2:],
                                   shard(5, 0, HALF // 2, (1,)), shard(6, HALF // 2 + 1, HALF - 1, (1,))])
    report = ShardSync(kinesis, table, Position.latest()).run()
    assert report.created == (sid(5), sid(6))  # closed ancestors 0 and 2 are never leased
    assert leases_of(table)[sid(5)].checkpoint == Checkpoint.trim_horizon()


def test_a_latest_start_is_pinned_to_the_time_the_leases_were_created(table: LeaseTable) -> None:
    """A lease that still said LATEST when its first owner died (or handed it over) before checkpointing
    would make the next owner skip every record put in between: LATEST is pinned, as the Spark side does."""
    before = datetime.now(UTC)
    ShardSync(listed(SPLIT_ONCE), table, Position.latest()).run()
    after = datetime.now(UTC)
    leases = leases_of(table)
    assert sorted(leases) == [sid(1), sid(2)]
    checkpoints = {l.checkpoint for l in leases.values()}
    assert len(checkpoints) == 1, f"one instant for every lease of one sync, got {checkpoints}"
    (pinned,) = checkpoints
    assert pinned.kind is CheckpointKind.AT_TIMESTAMP and before <= pinned.timestamp <= after  # type: ignore[operator]
    assert pinned.resume_position() == Position.at_timestamp(pinned.timestamp)  # type: ignore[arg-type]


def test_fresh_table_at_timestamp(table: LeaseTable) -> None:
    ShardSync(listed(SPLIT_ONCE), table, Position.at_timestamp("2026-01-01T00:00:00Z")).run()
    assert {l.checkpoint for l in leases_of(table).values()} == {Checkpoint.at_timestamp("2026-01-01T00:00:00Z")}


def test_repairs_a_table_the_stream_outgrew_while_nobody_ran(table: LeaseTable) -> None:
    table.create_lease(Lease(sid(0), Checkpoint.sequence("150"), HashRange(0, MAX_HASH_KEY)))
    report = ShardSync(listed(SPLIT_TWICE), table).run()
    assert report.created == (sid(1), sid(2), sid(3), sid(4))
    leases = leases_of(table)
    assert leases[sid(0)].checkpoint == Checkpoint.sequence("150")  # untouched
    assert all(leases[sid(i)].checkpoint == Checkpoint.trim_horizon() for i in range(1, 5))
    assert assignable(table) == [sid(0)]  # every new generation waits for its parent


def test_trimmed_parents_are_tolerated_and_their_stale_leases_removed(table: LeaseTable, caplog) -> None:
    table.create_lease(Lease(sid(0), Checkpoint.sequence("150"), HashRange(0, MAX_HASH_KEY)))
    kinesis = listed(SPLIT_TWICE[1:])  # 0 was trimmed past retention
    with caplog.at_level(logging.WARNING, logger="kinesis_src.shard_sync"):
        report = ShardSync(kinesis, table).run()
    assert report.deleted_trimmed == (sid(0),)
    assert "shardId-000000000000" in caplog.text and "150" in caplog.text and "lost" in caplog.text
    assert sid(0) not in leases_of(table)
    assert assignable(table) == [sid(1), sid(2)]  # a parent without a lease counts as drained


def test_a_fresh_table_on_a_stream_whose_parents_are_trimmed(table: LeaseTable) -> None:
    ShardSync(listed([SPLIT_TWICE[1], *SPLIT_TWICE[3:]]), table).run()  # 0 and 2 trimmed
    assert sorted(leases_of(table)) == [sid(1), sid(3), sid(4)]
    assert assignable(table) == [sid(1), sid(3), sid(4)]


def test_drained_parents_are_cleaned_up_once_children_started_and_never_recreated(table: LeaseTable) -> None:
    kinesis = listed(SPLIT_ONCE)
    sync = ShardSync(kinesis, table)
    sync.run()
    parent = table.take_lease(table.get_lease(sid(0)), "w")
    table.mark_shard_end(parent, [])
    assert not sync.run().deleted_drained  # children have not started
    child = table.take_lease(table.get_lease(sid(1)), "w")
    table.checkpoint(child, Checkpoint.sequence("205"))
    assert not sync.run().deleted_drained  # shard 2 has not started either
    other = table.take_lease(table.get_lease(sid(2)), "w")
    table.mark_shard_end(other, [])
    report = sync.run()
    assert report.deleted_drained == (sid(0),) and not report.created
    assert sid(0) not in leases_of(table)
    assert not sync.run().created  # 0 is still listed, but a descendant holds a lease


def test_a_lease_newer_than_the_listing_is_kept(table: LeaseTable) -> None:
    table.create_lease(Lease(sid(9), Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
    report = ShardSync(listed(SPLIT_TWICE), table).run()
    assert sid(9) not in report.deleted_trimmed and sid(9) in leases_of(table)
