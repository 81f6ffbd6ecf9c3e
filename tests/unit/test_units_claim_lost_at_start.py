"""A sticky worker whose claim is deleted while it starts (settling its units) hears of it at its next beat (#23).

While a sticky worker waits at start (a split waiting for the unit's readers
to leave), its claim is renewed by ``KeyRangeGuard.beat_if_due``. If the
claim is deleted meanwhile (another worker judged it dead), workers without a
range take the unit up again and their heartbeats keep moving in it: the
wait can never end, and must not be reported as workers of an old version
that never hand over. On moto's DynamoDB, a worker without a range that keeps
beating in the whole space's lease set stands for them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from moto_threads import serialized_mock_aws
from waiting import wait_for

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.in_place import run_sync
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.consumer.unit_readers import settle_claim
from kinesis_src.errors import KeyRangeClaimLostError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy
from lineage import KeyRange

APP, STREAM = "app", "orders"
MIDDLE = KeyRange.slice(1, 3)
TIMING = LeaseTiming(failover_s=1.0, renew_interval_s=0.1, scan_interval_s=0.05)


@pytest.fixture
def dynamodb(dummy_credentials: None) -> Iterator[DynamoDBClient]:
    with serialized_mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))
        LeaseTable(client, default_table_name(APP), APP, STREAM).ensure_table(create=True)
        yield client


@pytest.fixture
def plain_reader(dynamodb: DynamoDBClient) -> Iterator[None]:
    """A worker without a range reading the whole space: its heartbeat there moves every 50 ms."""
    table = LeaseTable(dynamodb, default_table_name(APP), APP, STREAM)
    me = table.register_worker("plain")
    done = threading.Event()

    def beat() -> None:
        nonlocal me
        while not done.wait(0.05):
            _, me = table.heartbeat(me)

    thread = threading.Thread(target=beat, name="plain-heartbeat", daemon=True)
    thread.start()
    yield
    done.set()
    thread.join(5)


def sticky() -> Consumer:
    return Consumer(STREAM, application_name=APP, region="us-east-1", worker_id="sticky", key_range=MIDDLE,
                    lease_timing=TIMING, handle_signals=False)


def test_a_claim_deleted_while_its_split_waits_fails_the_start_at_once_naming_the_lost_claim(
    dynamodb: DynamoDBClient, plain_reader: None
) -> None:
    consumer = sticky()
    consumer.handout.dynamodb = BotocoreDynamoDB(dynamodb)
    guard = consumer._guard
    run_sync(guard.before_start())  # the claim of MIDDLE, with the split of the whole space it needs
    others = RangeClaims(dynamodb, default_table_name(APP), APP, STREAM, TIMING.failover_s)
    (claim,) = others.read()[1]
    assert others.delete_dead(claim)  # as a worker without a range does once it judged the claim dead

    started = time.monotonic()
    with pytest.raises(KeyRangeClaimLostError, match=r"claim of key range .* on stream 'orders' was removed"):
        run_sync(settle_claim(consumer.handout.dynamodb, guard.claims[STREAM], MIDDLE, "sticky", guard.beat_if_due))
    took = time.monotonic() - started
    assert took < 3 * TIMING.failover_s, f"noticed after {took:.1f}s, not at the next beat"


def test_a_claim_that_stays_is_renewed_by_the_waits_beats() -> None:
    """The control, without servers: every due beat renews, and a renewal that keeps the claim raises nothing."""

    class Claims:
        renewals = 0

        async def arenew(self, dynamodb: object) -> bool:
            Claims.renewals += 1
            return True

    consumer = sticky()
    guard = consumer._guard
    guard.claims[STREAM] = Claims()  # type: ignore[assignment]

    def renewed_twice() -> bool:
        run_sync(guard.beat_if_due())
        return Claims.renewals >= 2

    wait_for(renewed_twice, 5, "two renewals by beat_if_due", poll_s=0.01)
