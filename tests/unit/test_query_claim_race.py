"""Two queries that both find the applicationName claim gone: only one registers it (moto DynamoDB)."""

from __future__ import annotations

from typing import Callable

import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ApplicationInUseError
from kinesis_src.leases.claim import QUERY_WORKER_ID, QueryClaim
from kinesis_src.leases.model import HeartbeatStatus, WorkerHeartbeat
from kinesis_src.leases.table import LeaseTable


@pytest.fixture
def table(dummy_credentials):
    with mock_aws():
        leases = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "claims", "etl", "orders")
        leases.ensure_table()
        yield leases


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
