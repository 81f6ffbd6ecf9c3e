"""QueryClaim: one running query per applicationName and stream (moto DynamoDB, real threads)."""

from __future__ import annotations

from typing import Callable

import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ApplicationInUseError
from kinesis_src.leases.claim import QUERY_WORKER_ID, QueryClaim
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease, WorkerHeartbeat
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


# -- two queries that both find the claim gone: only one registers it --------------------------------


def reading_then(table: LeaseTable, meanwhile: Callable[[], object]) -> LeaseTable:
    """The same table, but ``meanwhile`` runs right after its first read of the claim."""
    racing = LeaseTable(table.dynamodb, table.table_name, table.application, table.stream)
    read = racing.read_claim

    def read_then_race() -> WorkerHeartbeat | None:
        seen = read()
        racing.read_claim = read  # type: ignore[method-assign]
        meanwhile()
        return seen

    racing.read_claim = read_then_race  # type: ignore[method-assign]
    return racing


def test_of_two_queries_that_find_the_claim_gone_the_second_to_register_fails_at_once(table: LeaseTable) -> None:
    winner = QueryClaim(table, failover_s=30.0, renew_s=10.0)
    loser = QueryClaim(reading_then(table, winner.acquire), failover_s=30.0, renew_s=10.0)
    try:
        with pytest.raises(ApplicationInUseError, match="applicationName 'etl' is in use"):
            loser.acquire()  # read: no claim; the winner registers; then the loser's registration
        held = table.read_claim()
        assert held is not None and winner._claim is not None and held.session == winner._claim.session
        status, _ = table.renew_claim(winner._claim)
        assert status is HeartbeatStatus.RENEWED  # the winner still holds it
    finally:
        winner.release()
        loser.release()
    assert table.read_claim() is None


def test_a_claim_taken_over_is_registered_by_one_query_only(table: LeaseTable) -> None:
    """A stale claim, taken over, is gone: a query that registers meanwhile wins, the taker fails."""
    table.register_claim(QUERY_WORKER_ID)  # a driver that died without releasing
    other = QueryClaim(table, failover_s=30.0, renew_s=10.0)
    now = [0.0]

    def take_over_then_other_registers(claim: WorkerHeartbeat) -> bool:
        taken = LeaseTable.take_over_claim(table, claim)
        other.acquire()
        return taken

    taker_table = LeaseTable(table.dynamodb, table.table_name, table.application, table.stream)
    taker_table.take_over_claim = take_over_then_other_registers  # type: ignore[method-assign]
    taker = QueryClaim(taker_table, failover_s=1.0, renew_s=0.5, clock=lambda: now[0],
                       sleep=lambda s: now.__setitem__(0, now[0] + s))
    try:
        with pytest.raises(ApplicationInUseError):
            taker.acquire()
        held = table.read_claim()
        assert held is not None and other._claim is not None and held.session == other._claim.session
    finally:
        other.release()


def test_a_retried_registration_that_had_landed_is_ours(table: LeaseTable, monkeypatch) -> None:
    """The first put landed but its answer was lost; the retry finds our own claim: registered."""
    put = table.dynamodb.put_item

    def landed_then_retried(*args, **kwargs):
        put(*args, **kwargs)
        return put(*args, **kwargs)

    monkeypatch.setattr(table.dynamodb, "put_item", landed_then_retried)
    claim = table.register_claim(QUERY_WORKER_ID)
    held = table.read_claim()
    assert claim is not None and held is not None and held.session == claim.session
