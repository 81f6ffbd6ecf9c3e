"""#11 on a fake that refuses what AWS refuses: two units of one worker both read a shard they share.

AWS lets one subscription of a stream consumer read a shard at a time: another SubscribeToShard of the
pair fails with ResourceInUseException while the first is open. A worker without a range that reads two
units overlapping one shard (here: made by a sticky claim of the middle third, recorded straight in the
table on moto's DynamoDB) subscribed to the shard under one consumer for both, so on AWS one unit's
records never came while the other held the shard. With ``FakeKinesis(concurrent_subscriptions="refused")``
the fake refuses the same way, and subscriptions outlive the test (as AWS's 5 minutes would), so the
test shows the records of both units arriving, not just two consumer names.

Self-contained on purpose (no import from test_unit_consumers.py or of names #11 added): copied onto the
tree before #11's fix it must fail there, and it does (see the helper's report).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis, shard_id
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.in_place import run_sync
from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.consumer.unit_readers import settle_claim
from kinesis_src.consumer.units import FULL
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name
from kinesis_src.positions import Position
from kinesis_src.retry import RetryPolicy
from lineage import KeyRange, hash_key_of

APP = "app"
MIDDLE = KeyRange.slice(1, 3)
LOWER, UPPER = KeyRange(FULL.start, MIDDLE.start - 1), KeyRange(MIDDLE.end + 1, FULL.end)
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)  # the sticky claim stays live
KEYS = [f"k{i}" for i in range(12)]
READ_DEADLINE_S = 15.0  # HEAD reads everything in well under a second; before #11 one unit never does


@pytest.fixture(params=["refused"])
def strict(request: pytest.FixtureRequest, dummy_credentials: None,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKinesis]:
    """Stream "orders", one shard over the whole space; one record per key; moto serves DynamoDB."""
    fake = FakeKinesis(concurrent_subscriptions=request.param)
    fake.create_stream("orders")
    for key in KEYS:
        fake.put_record("orders", key, key.encode())
    fake.records_per_event = 10
    fake.events_per_subscription = 10**9  # no subscription ends during the test (AWS: 5 minutes)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():  # the Consumer's threads call moto at once
        yield fake


def split_by_a_sticky_claim() -> None:
    """A live sticky claim of the middle third (units LOWER, MIDDLE, UPPER), its split finished."""
    dynamodb = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))
    LeaseTable(dynamodb, default_table_name(APP), APP, "orders").ensure_table(create=True)
    claims = RangeClaims(dynamodb, default_table_name(APP), APP, "orders", TIMING.failover_s)
    claims.claim("sticky", MIDDLE)
    assert run_sync(settle_claim(BotocoreDynamoDB(claims.dynamodb), claims, MIDDLE, "sticky")) == (MIDDLE,)


def records_of(unit: KeyRange) -> list[bytes]:
    return sorted(key.encode() for key in KEYS if hash_key_of(key) in unit)


async def read_until(consumer: Consumer, wanted: list[bytes], seen: list[bytes]) -> None:
    """Read and checkpoint batches until every wanted record came (each comes once: one unit holds it)."""
    while sorted(seen) != wanted:
        batch = await consumer.__anext__()
        seen.extend(r.data for r in batch.records)
        await batch.checkpoint()


def test_two_units_sharing_a_shard_on_one_worker_both_read_it_where_aws_allows_one_subscription_per_consumer(
    strict: FakeKinesis,
) -> None:
    split_by_a_sticky_claim()
    lower, upper = records_of(LOWER), records_of(UPPER)
    assert lower and upper, "the keys must put records in both units"
    wanted = sorted(lower + upper)

    async def scenario() -> tuple[list[str], list[bytes], dict[tuple[str, str], int]]:
        async with Consumer("orders", application_name=APP, region="us-east-1", worker_id="plain",
                            consumer_mode="efo", lease_timing=TIMING, handle_signals=False,
                            idle_interval_s=0.05) as consumer:
            units = sorted(consumer.readers)
            seen: list[bytes] = []
            try:
                await asyncio.wait_for(read_until(consumer, wanted, seen), READ_DEADLINE_S)
            except TimeoutError:
                pass  # reported below, with what did come
            return units, seen, dict(strict.open_subscriptions)

    units, seen, held = asyncio.run(asyncio.wait_for(scenario(), READ_DEADLINE_S + 30))
    assert units == sorted([f"orders@{LOWER}", f"orders@{UPPER}"])
    missing = {name: sorted(set(records) - set(seen)) for name, records in (("LOWER", lower), ("UPPER", upper))}
    assert sorted(seen) == wanted, f"records never delivered within {READ_DEADLINE_S:.0f}s: {missing}"
    assert len(held) == 2 and {sid for _, sid in held} == {shard_id(0)}, (
        "both units hold a subscription to shard 0 at once, under two consumers")


def plain_worker() -> Consumer:
    return Consumer("orders", application_name=APP, region="us-east-1", worker_id="plain", consumer_mode="efo",
                    lease_timing=TIMING, handle_signals=False, idle_interval_s=0.05)


@pytest.mark.parametrize("strict", ["takeover"], indirect=True)
def test_a_subscription_taken_over_by_another_reader_of_the_consumer_is_resubscribed_not_fatal(
    strict: FakeKinesis,
) -> None:
    """All workers of an application read their usual unit under one consumer: a worker that takes (or
    steals) a lease subscribes while the old owner may still read. 5 s or more after the old owner's
    subscription, AWS gives the pair to the new one and fails the old one's event stream with
    ResourceInUseException. That costs the old owner this subscription, not its other shards: here the
    other reader lets go at once, and the worker must go on to the record written after the takeover."""

    async def scenario() -> list[bytes]:
        async with plain_worker() as consumer:
            await read_until(consumer, sorted(k.encode() for k in KEYS), [])
            ((consumer_arn, sid),) = strict.open_subscriptions
            strict.advance(5.0)
            other = strict.subscribe(consumer_arn, sid, Position.latest())
            next(other)  # taken over: the worker's next event fails
            strict.put_record("orders", "after", b"after")
            other.close()
            seen: list[bytes] = []
            await asyncio.wait_for(read_until(consumer, [b"after"], seen), READ_DEADLINE_S)
            return seen

    assert asyncio.run(asyncio.wait_for(scenario(), READ_DEADLINE_S + 30)) == [b"after"]
