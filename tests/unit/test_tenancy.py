"""QueryClaim: one running query per applicationName and stream (moto DynamoDB, real threads)."""

from __future__ import annotations

import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ApplicationInUseError
from kinesis_src.leases.claim import QUERY_WORKER_ID, QueryClaim
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from lineage import MAX_HASH_KEY, HashRange


@pytest.fixture
def table(dummy_credentials):
    with mock_aws():
        leases = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "claims", "etl", "orders")
        leases.ensure_table()
        yield leases


def test_a_live_claim_refuses_a_second_query_naming_the_option(table: LeaseTable) -> None:
    first = QueryClaim(table, failover_s=3.0, renew_s=0.1)
    first.acquire()
    try:
        with pytest.raises(ApplicationInUseError) as info:
            QueryClaim(table, failover_s=3.0, renew_s=0.1).acquire()
        assert "applicationName 'etl'" in str(info.value) and "'orders'" in str(info.value)
        assert not first.lost
    finally:
        first.release()
    assert table.read_claim() is None


def test_a_stale_claim_is_taken_over_after_the_failover_time(table: LeaseTable) -> None:
    crashed = table.register_claim(QUERY_WORKER_ID)  # a driver that died without releasing
    second = QueryClaim(table, failover_s=0.6, renew_s=0.2)
    second.acquire()
    try:
        now = table.read_claim()
        assert now is not None and now.session != crashed.session
    finally:
        second.release()


def test_a_released_claim_is_free_at_once(table: LeaseTable) -> None:
    first = QueryClaim(table, failover_s=30.0, renew_s=10.0)
    first.acquire()
    first.release()
    second = QueryClaim(table, failover_s=30.0, renew_s=10.0)
    second.acquire()  # no wait: nothing is claimed
    second.release()


def test_a_coordinator_does_not_count_the_query_claim_as_a_worker(table: LeaseTable) -> None:
    claim = QueryClaim(table, failover_s=30.0, renew_s=10.0)
    claim.acquire()
    try:
        assert table.scan().workers == {}
        for i in range(2):
            table.create_lease(Lease(f"shardId-{i:012d}", Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
        coordinator = LeaseCoordinator(table, "a", timing=LeaseTiming(failover_s=3.0, renew_interval_s=1.0))
        coordinator.register()
        report = coordinator.run_once()
        assert report.live_workers == ("a",) and len(coordinator.held()) == 2
    finally:
        claim.release()
