"""Key-range claims judged by the one expiry judge (range_claims): watches wait on the injected clock, and a
rival claim is watched from the reading it was found in (moto DynamoDB, fake clock)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from consumer_harness import awaiting

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.range_claims import RangeClaims, observe_live
from kinesis_src.errors import KeyRangeInUseError
from kinesis_src.in_place import run_sync
from kinesis_src.leases.table import LeaseTable
from lineage import KeyRange

TABLE, APP, STREAM = "leases", "app", "orders"
FAILOVER_S = 1.0


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.naps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds


def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    def real(seconds: float) -> None:
        raise AssertionError(f"slept {seconds}s of real time under an injected clock")

    monkeypatch.setattr(time, "sleep", real)


def test_a_watch_waits_on_the_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    no_real_sleep(monkeypatch)
    fake = FakeTime()
    still = {"a": ("s1", 1)}
    assert run_sync(observe_live({"a": "A"}, awaiting(lambda: still), 1.0, fake, sleep=fake.sleep)) == []
    assert fake.now == pytest.approx(1.0)  # judged dead exactly at the failover time on the fake clock
    assert max(fake.naps) <= 0.2  # polled every poll_s, however long the failover time


@pytest.fixture
def dynamodb(dummy_credentials: None) -> Iterator[DynamoDBClient]:
    with mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1"))
        LeaseTable(client, TABLE, APP, STREAM).ensure_table(create=True)
        yield client


def claims_of(dynamodb: DynamoDBClient, fake: FakeTime) -> RangeClaims:
    return RangeClaims(dynamodb, TABLE, APP, STREAM, FAILOVER_S, fake, fake.sleep)


def test_a_rival_that_beats_between_the_reading_that_found_it_and_the_watch_is_live(
    dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its heartbeat moved after the reading that found it: its owner is alive, so the claim is refused.
    Watching from a second reading instead saw no move, judged it dead a failover time later, failed to
    delete it by the first reading's heartbeat, and took the range after a second failover time."""
    no_real_sleep(monkeypatch)
    rival = claims_of(dynamodb, FakeTime())
    rival.claim("rival", KeyRange.slice(0, 2))
    fake = FakeTime()
    mine = claims_of(dynamodb, fake)
    read_all = mine.aread_all

    async def found_then_rival_beats(client):  # type: ignore[no-untyped-def]
        found = await read_all(client)
        rival.renew()
        monkeypatch.setattr(mine, "aread_all", read_all)
        return found

    monkeypatch.setattr(mine, "aread_all", found_then_rival_beats)
    with pytest.raises(KeyRangeInUseError, match="worker 'rival' claims key range"):
        mine.claim("mine", KeyRange.slice(0, 4))
    assert fake.now < FAILOVER_S


def test_a_rival_that_never_beats_is_deleted_after_one_failover_time(
    dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_real_sleep(monkeypatch)
    claims_of(dynamodb, FakeTime()).claim("rival", KeyRange.slice(0, 2))
    fake = FakeTime()
    mine = claims_of(dynamodb, fake)
    assert mine.claim("mine", KeyRange.slice(0, 4)).worker_id == "mine"
    assert [c.worker_id for c in mine.read()[1]] == ["mine"]
    assert fake.now == pytest.approx(FAILOVER_S)
