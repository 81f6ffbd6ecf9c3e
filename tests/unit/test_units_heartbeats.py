"""Which units hold a worker's heartbeat while it starts: only those whose lease coordinator runs (#23).

A heartbeat item in a unit's lease set tells the unit's other readers that a
live worker reads it: their lease dealing counts it as a starving worker,
deals it free leases and hands it leases over. A worker without a range
writes its heartbeat in a unit before it reads the claims one last time (so
a sticky worker cannot miss it), but a heartbeat whose coordinator is not
running (not started yet, or never, because the start failed) takes leases
nobody reads until it is judged dead, a failover time later. Here the
Consumer starts on moto's DynamoDB and the fake Kinesis, reading the two
units a live sticky claim of the middle third leaves it (LOWER, UPPER).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws

from kinesis_src.in_place import run_sync
from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.consumer.unit_readers import settle_claim
from kinesis_src.consumer.units import FULL
from kinesis_src.errors import KinesisSourceError
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy
from lineage import KeyRange

APP, STREAM = "app", "orders"
MIDDLE = KeyRange.slice(1, 3)
LOWER, UPPER = KeyRange(FULL.start, MIDDLE.start - 1), KeyRange(MIDDLE.end + 1, FULL.end)
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)  # the sticky claim stays live


@pytest.fixture
def dynamodb(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoDBClient]:
    """Stream "orders" (one shard) on the fake; on moto, a live sticky claim of MIDDLE, its split done."""
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))
        LeaseTable(client, default_table_name(APP), APP, STREAM).ensure_table(create=True)
        claims = RangeClaims(client, default_table_name(APP), APP, STREAM, TIMING.failover_s)
        claims.claim("sticky", MIDDLE)
        assert run_sync(settle_claim(BotocoreDynamoDB(claims.dynamodb), claims, MIDDLE, "sticky")) == (MIDDLE,)
        yield client


def heartbeats_in(dynamodb: DynamoDBClient, unit: KeyRange) -> set[str]:
    """The workers with a heartbeat item in the unit's lease set."""
    return set(LeaseTable(dynamodb, default_table_name(APP), APP, STREAM, scope=str(unit)).list_workers())


def plain() -> Consumer:
    return Consumer(STREAM, application_name=APP, region="us-east-1", worker_id="plain", lease_timing=TIMING,
                    handle_signals=False, idle_interval_s=0.05)


def test_no_unit_holds_the_heartbeat_of_a_coordinator_that_is_not_running_while_the_worker_starts(
    dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen as each unit's coordinator starts: the units whose coordinators are not running yet."""
    astart = LeaseCoordinator.astart
    running: set[str] = set()
    phantoms: list[tuple[str, str]] = []  # (unit starting now, unit with a heartbeat and no running coordinator)

    async def observed(self: LeaseCoordinator, *args: Any, **kwargs: Any) -> LeaseCoordinator:
        for unit in (LOWER, UPPER):
            if str(unit) not in running | {self.table.scope} and "plain" in heartbeats_in(dynamodb, unit):
                phantoms.append((self.table.scope, str(unit)))
        started = await astart(self, *args, **kwargs)
        running.add(self.table.scope)
        return started

    monkeypatch.setattr(LeaseCoordinator, "astart", observed)

    async def scenario() -> list[str]:
        async with plain() as consumer:
            return sorted(consumer.readers)

    assert asyncio.run(asyncio.wait_for(scenario(), 20)) == [f"{STREAM}@{LOWER}", f"{STREAM}@{UPPER}"]
    assert running == {str(LOWER), str(UPPER)}
    assert phantoms == [], f"heartbeats of coordinators not running, as (starting, unit): {phantoms}"


def test_a_start_that_fails_leaves_no_heartbeat_in_any_unit(
    dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first unit's coordinator fails to start (its first cycle): the other one never starts, and
    neither may heartbeat."""
    arun_once = LeaseCoordinator.arun_once

    async def failing(self: LeaseCoordinator) -> Any:
        if self.table.scope == str(LOWER):
            raise KinesisSourceError("the lease table is unreachable")
        return await arun_once(self)

    monkeypatch.setattr(LeaseCoordinator, "arun_once", failing)
    with pytest.raises(KinesisSourceError, match="unreachable"):
        asyncio.run(asyncio.wait_for(plain().start(), 20))
    assert {str(u): heartbeats_in(dynamodb, u) for u in (LOWER, UPPER)} == {str(LOWER): set(), str(UPPER): set()}
