"""Sticky key ranges in the Consumer, on kinesis-mock + DynamoDB Local.

* Three worker processes (tests/integration/consumer_worker.py, ``--key-range i/3``)
  read one stream through a split and a merge: every record is delivered
  exactly once, every key by one worker only (the one whose slice holds its
  hash key) before and after both reshards, in order per key.
* Claims: a worker whose range overlaps a live claim of another range fails
  at start naming it; the same range is shared; a claim whose worker died
  expires after the failover time; a worker without a range reads what no
  claim covers (tests/integration/test_mixed_key_ranges.py); two claims made
  at once are serialized (the later fails naming the earlier).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, defaultdict

import pytest
import waiting  # tests/waiting.py
from test_consumer import (  # worker processes
    APP,
    FAILOVER,
    TIMING,
    deliveries,
    make_stream,
    spawn,  # noqa: F401 - a fixture
    split_then_merge_mid_read,
)

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.in_place import run_sync
from kinesis_src import Consumer, KeyRange
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.range_claims import RangeClaim, RangeClaims
from kinesis_src.consumer.units import UnitMap
from kinesis_src.errors import KeyRangeInUseError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.testing import KeyedProducer
from lineage import hash_key_of

pytestmark = pytest.mark.integration

SLICES = 3


def test_slices_deliver_each_record_once_and_each_key_to_one_worker_through_split_and_merge(
    kinesis, stream_name, spawn  # noqa: F811 - the fixture imported above
) -> None:
    began = time.monotonic()
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    procs = [spawn(f"slice{i}", stream_name, "--key-range", f"{i}/{SLICES}", "--idle", "0.1") for i in range(SLICES)]

    def all_delivered() -> bool:
        return producer.expected() <= {(k, n) for d in deliveries(procs) for k, n, _ in d.records}

    waiting.wait_for(all_delivered, 60, "the three slices to deliver the first rounds", 0.1)
    split_then_merge_mid_read(kinesis, stream_name, producer)
    waiting.wait_for(all_delivered, 60, "every record after the split and the merge", 0.1)
    for proc in procs:
        proc.sigterm()
    for proc in procs:
        assert proc.wait_exit(30) == 0, proc.stderr_tail()

    delivered = deliveries(procs)
    copies = Counter((k, n) for d in delivered for k, n, _ in d.records)
    assert set(copies) == producer.expected()
    assert max(copies.values()) == 1, f"delivered twice: {[r for r, c in copies.items() if c > 1][:5]}"
    owner: dict[str, set[str]] = defaultdict(set)
    for d in delivered:
        for key, _, _ in d.records:
            owner[key].add(d.worker)
    for key, who in owner.items():
        expected = f"slice{next(i for i in range(SLICES) if hash_key_of(key) in KeyRange.slice(i, SLICES))}"
        assert who == {expected}, f"{key} delivered by {sorted(who)}, its slice is {expected}"
    shards_read = {d.shard for d in delivered}
    assert {"shardId-000000000002", "shardId-000000000004"} <= shards_read  # children were read too
    last: dict[str, int] = {}
    for d in delivered:  # one worker per key: its delivery order is the key's order
        for key, n, _ in d.records:
            assert n > last.get(key, 0), f"{key}:{n} after {key}:{last[key]}"
            last[key] = n
    print(f"key ranges: {len(copies)} records over {SLICES} slices in {time.monotonic() - began:.1f}s")


def sticky(stream: str, worker_id: str, key_range: KeyRange | None) -> Consumer:
    return Consumer(stream, application_name=APP, worker_id=worker_id, key_range=key_range, lease_timing=TIMING,
                    idle_interval_s=0.2, handle_signals=False)


def test_claims_overlap_fails_naming_the_first_the_same_range_is_shared_and_a_dead_claim_expires(
    kinesis, stream_name, emulator_env
) -> None:
    make_stream(kinesis, stream_name, 1)
    lower, upper = KeyRange.slice(0, 2), KeyRange.slice(1, 2)
    claims = RangeClaims(DynamoDBClient(AwsSettings.from_env()), default_table_name(APP), APP, stream_name, FAILOVER)

    async def scenario() -> None:
        async with sticky(stream_name, "first", lower):
            straddling = KeyRange(lower.end - 10, upper.start + 10)
            with pytest.raises(KeyRangeInUseError, match=r"worker 'first' claims key range .* \(claim #1\)"):
                await sticky(stream_name, "second", straddling).start()
            async with sticky(stream_name, "twin", lower):  # the very same range: shared, not refused
                pass
            async with sticky(stream_name, "plain", None) as plain:  # reads what no claim covers
                assert {r.unit for r in plain.readers.values()} == {upper}
            # A claim whose worker died (never renewed) overlaps: it expires after the failover time.
            await asyncio.to_thread(claims.claim, "ghost", upper)
            waited = time.monotonic()
            async with sticky(stream_name, "heir", KeyRange(upper.start, upper.start + 1000)):
                assert time.monotonic() - waited >= FAILOVER * 0.9
                _, now = await asyncio.to_thread(claims.read)
                assert {c.worker_id for c in now} == {"first", "heir"}

    asyncio.run(scenario())
    assert claims.read()[1] == []  # every claim released on close


def test_two_claims_made_at_once_are_serialized_the_later_fails_naming_the_earlier(emulator_env) -> None:
    """Both read the same registration version; only the first transaction commits. The second, read
    again, finds the first's claim live (it renews) and fails naming it, without waiting out a failover."""
    stream = f"kr-race-{uuid.uuid4().hex[:6]}"
    dynamodb = DynamoDBClient(AwsSettings.from_env())
    LeaseTable(dynamodb, default_table_name(APP), APP, stream).ensure_table(create=True)
    early, late = (RangeClaims(dynamodb, default_table_name(APP), APP, stream, FAILOVER) for _ in range(2))
    version, _ = early.read()
    assert late.read()[0] == version
    lower, straddling = KeyRange.slice(0, 2), KeyRange(KeyRange.slice(0, 2).end - 5, KeyRange.slice(1, 2).end)
    first = early.claim("early", lower)
    assert first.order == version + 1
    writer = BotocoreDynamoDB(dynamodb)
    put = {"Put": {"TableName": late.table_name,
                   "Item": late._item(RangeClaim("late", straddling, "s", 0, version + 1), writer)}}
    assert not run_sync(late.arecord_units(writer, version, UnitMap(), put))  # the race lost
    stop = asyncio.Event()

    async def renew_and_claim() -> None:
        async def renewer() -> None:
            while not stop.is_set():
                assert await asyncio.to_thread(early.renew)
                await asyncio.sleep(0.3)

        task = asyncio.create_task(renewer())
        began = time.monotonic()
        try:
            with pytest.raises(KeyRangeInUseError, match=r"worker 'early' claims key range .* \(claim #"):
                await asyncio.to_thread(late.claim, "late", straddling)
            assert time.monotonic() - began < FAILOVER
        finally:
            stop.set()
            await task

    asyncio.run(renew_and_claim())
    assert [c.worker_id for c in late.read()[1]] == ["early"]
    early.release()
    assert late.read()[1] == []
