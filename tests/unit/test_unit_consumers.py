"""Enhanced fan-out with several units per worker (#11): one stream consumer per unit, without servers.

AWS allows one subscription per (stream consumer, shard). A worker reading two units that overlap one
shard subscribes to it once per unit, so each unit needs a consumer of its own
(:func:`kinesis_src.retrieval.registration.unit_consumer_name`). Here the Consumer starts for real on
moto's DynamoDB (lease table, claims, units) with the fake Kinesis as both its clients, and the units
are made by a sticky claim of the middle third recorded straight in the table.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_harness import awaiting, until
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

import kinesis_src.retrieval.registration as registration_module
from kinesis_src.in_place import run_sync
from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.aws.fanout import CONSUMER_LIMIT
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.consumer.unit_readers import settle_claim, while_beating
from kinesis_src.consumer.units import FULL, scope_of
from kinesis_src.errors import ConsumerLimitError, StreamNotFoundError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name, validate_consumer_name
from kinesis_src.retrieval.registration import FanOutTarget, unit_consumer_name
from kinesis_src.retry import RetryPolicy
from lineage import KeyRange, hash_key_of

APP = "app"
MIDDLE = KeyRange.slice(1, 3)
LOWER, UPPER = KeyRange(FULL.start, MIDDLE.start - 1), KeyRange(MIDDLE.end + 1, FULL.end)
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)  # the sticky claim stays live


# -- the name -------------------------------------------------------------------------------------


def test_the_usual_unit_keeps_the_plain_name_and_every_other_unit_gets_a_stable_name_of_its_own() -> None:
    assert unit_consumer_name("billing", "", "") == "billing"  # a worker without a range, the whole space
    assert unit_consumer_name("billing-0", str(MIDDLE), str(MIDDLE)) == "billing-0"  # a sticky worker's own range
    names = {unit_consumer_name("billing", scope_of(u), "") for u in (LOWER, MIDDLE, UPPER)}
    assert len(names) == 3 and "billing" not in names
    assert unit_consumer_name("billing", str(LOWER), "") == unit_consumer_name("billing", str(LOWER), "")
    assert all(re.fullmatch(r"billing-unit-[0-9a-f]{10}", n) for n in names)
    assert unit_consumer_name("other", str(LOWER), "") != unit_consumer_name("billing", str(LOWER), "")


def test_a_long_base_name_is_cut_so_the_digest_always_fits() -> None:
    long_a, long_b = "a" * 128, "a" * 127 + "b"  # equal for the first 117 characters
    a, b = (unit_consumer_name(base, str(LOWER), "") for base in (long_a, long_b))
    assert len(a) == len(b) == 128 and a != b
    assert validate_consumer_name(a) == a and validate_consumer_name(b) == b
    assert a.startswith("a" * 112 + "-unit-")


# -- registering while a sticky worker's claims are renewed -------------------------------------------


def test_a_registration_waiting_for_active_does_not_stop_the_claims_heartbeat() -> None:
    """The registration (here: an event the third beat sets) is awaited while the caller keeps beating."""
    beats: list[int] = []

    async def registered() -> str:
        active = asyncio.Event()

        async def beat() -> None:
            beats.append(len(beats))
            if len(beats) == 3:
                active.set()

        async def register() -> str:
            await asyncio.wait_for(active.wait(), 10)
            return "registered"

        return await while_beating(register(), beat, 0.01)

    assert asyncio.run(registered()) == "registered"
    assert len(beats) == 3


def test_a_failed_registration_reaches_the_caller() -> None:
    async def fail() -> None:
        raise ConsumerLimitError("20 consumers")

    with pytest.raises(ConsumerLimitError, match="20 consumers"):
        asyncio.run(while_beating(fail(), awaiting(lambda: None), 0.01))


# -- the Consumer on moto + the fake Kinesis --------------------------------------------------------


@pytest.fixture
def fake(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKinesis]:
    """Stream "orders", one shard over the whole space, six records; moto serves DynamoDB."""
    fake = FakeKinesis()
    fake.create_stream("orders")
    for i in range(6):
        fake.put_record("orders", f"k{i}", b"r%d" % i)
    fake.records_per_event = 10
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():  # the Consumer's threads call moto at once
        yield fake


def worker(streams: str | list[str], **options: Any) -> Consumer:
    return Consumer(streams, application_name=APP, region="us-east-1", worker_id="plain", consumer_mode="efo",
                    lease_timing=TIMING, handle_signals=False, idle_interval_s=0.05, **options)


def split_by_a_sticky_claim(claim: KeyRange = MIDDLE, stream: str = "orders") -> RangeClaims:
    """A live sticky claim (of the middle third: units LOWER, MIDDLE, UPPER), its split finished."""
    dynamodb = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))
    LeaseTable(dynamodb, default_table_name(APP), APP, stream).ensure_table(create=True)
    claims = RangeClaims(dynamodb, default_table_name(APP), APP, stream, TIMING.failover_s)
    claims.claim("sticky", claim)
    assert run_sync(settle_claim(BotocoreDynamoDB(claims.dynamodb), claims, claim, "sticky")) == (claim,)
    return claims


def subscribed_with(fake: FakeKinesis) -> set[str]:
    return {c.args["consumer_arn"] for c in fake.calls_to("subscribe")}


def outside_the_claim() -> list[bytes]:
    return sorted(b"r%d" % i for i in range(6) if hash_key_of(f"k{i}") not in MIDDLE)


def test_two_units_of_one_shard_on_one_worker_subscribe_under_two_consumers(fake: FakeKinesis) -> None:
    split_by_a_sticky_claim()
    wanted = outside_the_claim()
    assert wanted

    async def scenario() -> tuple[dict[str, FanOutTarget | None], list[bytes]]:
        async with worker("orders") as consumer:
            targets = {key: reader.fan_out for key, reader in consumer.readers.items()}
            seen: list[bytes] = []
            while len(seen) < len(wanted):  # each record once, from the one unit holding its hash key
                batch = await consumer.__anext__()
                seen.extend(r.data for r in batch.records)
                await batch.checkpoint()
            await until(lambda: len(subscribed_with(fake)) == 2, "both units to subscribe")
            return targets, seen

    targets, seen = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert sorted(seen) == wanted
    assert set(targets) == {f"orders@{LOWER}", f"orders@{UPPER}"}
    assert all(t is not None for t in targets.values())
    arns = {t.consumer_arn for t in targets.values() if t is not None}
    assert len(arns) == 2, "two units of one worker share a stream consumer"
    assert {t.consumer_name for t in targets.values() if t is not None} == {
        unit_consumer_name(APP, str(LOWER), ""), unit_consumer_name(APP, str(UPPER), "")}
    assert subscribed_with(fake) == arns  # shard 0 straddles both units: one subscription per unit's consumer
    assert set(fake.stream("orders").consumers) == {t.consumer_name for t in targets.values() if t is not None}


def piece_names() -> set[str]:
    return {unit_consumer_name(APP, str(LOWER), ""), unit_consumer_name(APP, str(UPPER), "")}


def on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_units_started_at_runtime_get_their_own_consumers_and_close_deregisters_every_one(
    fake: FakeKinesis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker reads the whole space under the plain name; a sticky claim cuts it; the pieces it then
    starts have a consumer each, registered once, awaited on the event loop (the wait for ACTIVE sleeps
    there without blocking it). The whole space's consumer stays registered after its hand-over (others
    may be subscribed under it, and it may come back), and close() deregisters all three on request."""
    registered: list[tuple[str, bool]] = []  # (name, registered by awaiting on the loop)
    register, aregister = registration_module.register, registration_module.aregister

    def recording(kinesis: Any, stream: str, name: str, **kwargs: Any) -> FanOutTarget:
        registered.append((name, on_a_loop()))
        return register(kinesis, stream, name, **kwargs)

    async def arecording(kinesis: Any, stream: str, name: str) -> FanOutTarget:
        registered.append((name, True))
        return await aregister(kinesis, stream, name)

    monkeypatch.setattr(registration_module, "register", recording)
    monkeypatch.setattr(registration_module, "aregister", arecording)

    async def scenario() -> tuple[FanOutTarget | None, dict[str, FanOutTarget | None], set[str]]:
        async with worker("orders", require_consumer_deregistration=True) as consumer:
            (whole,) = consumer.readers.values()
            await asyncio.to_thread(split_by_a_sticky_claim)
            pieces = {f"orders@{LOWER}", f"orders@{UPPER}"}
            await until(lambda: set(consumer.readers) == pieces, "the pieces to start", 15)
            await until(lambda: len(subscribed_with(fake) - {whole.fan_out.consumer_arn}) == 2,  # type: ignore[union-attr]
                        "both pieces to subscribe", 15)
            targets = {key: reader.fan_out for key, reader in consumer.readers.items()}
            return whole.fan_out, targets, set(fake.stream("orders").consumers)

    whole, targets, names = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert registered[0] == (APP, True)  # the whole space's, at start: on the loop, as each piece's
    assert sorted(registered[1:]) == sorted((name, True) for name in piece_names())  # each piece's, once
    assert whole is not None and whole.consumer_name == APP
    assert all(t is not None for t in targets.values())
    arns = {t.consumer_arn for t in targets.values() if t is not None}
    assert len(arns) == 2 and whole.consumer_arn not in arns
    assert {t.consumer_name for t in targets.values() if t is not None} == piece_names()
    assert names == {APP} | piece_names()  # kept while the worker runs
    assert fake.stream("orders").consumers == {}  # require_consumer_deregistration: every one, at close


def test_a_start_that_fails_on_a_later_stream_deregisters_the_consumers_it_registered(fake: FakeKinesis) -> None:
    """"payments" has the 20 consumers Kinesis allows: registering there fails after "orders" registered."""
    payments = fake.create_stream("payments")
    for n in range(CONSUMER_LIMIT):
        fake.register_consumer(payments.arn, f"other-{n}")
    consumer = worker(["orders", "payments"], require_consumer_deregistration=True)
    with pytest.raises(ConsumerLimitError):
        asyncio.run(asyncio.wait_for(consumer.start(), 20))
    assert fake.stream("orders").consumers == {}
    assert len(fake.stream("payments").consumers) == CONSUMER_LIMIT


def test_a_start_that_fails_on_a_missing_stream_leaves_no_consumer_registered(fake: FakeKinesis) -> None:
    consumer = worker(["orders", "missing"], require_consumer_deregistration=True)
    with pytest.raises(StreamNotFoundError, match="missing"):
        asyncio.run(asyncio.wait_for(consumer.start(), 20))
    assert fake.stream("orders").consumers == {}


def test_a_sticky_worker_whose_claim_is_two_units_reads_each_under_a_consumer_named_after_its_own(
    fake: FakeKinesis,
) -> None:
    """Units 0/4 and 1/4 (an earlier claim of 0/4, released), then a worker claiming 0/2: two units."""
    split_by_a_sticky_claim(KeyRange.slice(0, 4)).release()
    low, high = KeyRange.slice(0, 4), KeyRange.slice(1, 4)

    async def scenario() -> dict[str, FanOutTarget | None]:
        async with worker("orders", key_range="0/2", consumer_name="app-low") as consumer:
            return {key: reader.fan_out for key, reader in consumer.readers.items()}

    targets = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert set(targets) == {f"orders@{low}", f"orders@{high}"}
    names = {unit_consumer_name("app-low", str(unit), str(KeyRange.slice(0, 2))) for unit in (low, high)}
    assert {t.consumer_name for t in targets.values() if t is not None} == names and len(names) == 2
    assert len({t.consumer_arn for t in targets.values() if t is not None}) == 2


def test_a_unit_that_cannot_have_a_consumer_fails_the_worker_naming_the_limit(fake: FakeKinesis) -> None:
    """The stream's 20 consumer slots are taken when the worker starts reading the pieces: no retry frees
    one, and nobody else can read the unit either, so the application hears of it."""
    stream = fake.stream("orders")

    async def scenario() -> None:
        async with worker("orders") as consumer:
            for n in range(CONSUMER_LIMIT - 1):
                fake.register_consumer(stream.arn, f"other-{n}")
            await asyncio.to_thread(split_by_a_sticky_claim)
            async for _ in consumer:
                pass

    with pytest.raises(ConsumerLimitError):
        asyncio.run(asyncio.wait_for(scenario(), 20))
