"""A sticky worker ends the shards outside its key range unread; one such SHARD_END that fails must not
stall a merge (issue #23 item 1). The Consumer runs for real on moto's DynamoDB (lease coordinator,
claims, shard sync) with the fake Kinesis as its clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_harness import until
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.consumer import Consumer
from kinesis_src.errors import RetriesExhaustedError, ThrottledError
from kinesis_src.leases.table_calls import TableCalls
from kinesis_src.leases.timing import LeaseTiming
from lineage import KeyRange, hash_key_of

UPPER = KeyRange.slice(1, 2)  # the upper half: covers shard 1, misses shard 0, straddles their merge child
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)


@pytest.fixture
def merged(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeKinesis, str, str]]:
    """Stream "orders": shards 0 and 1 (the two halves), merged into shard 2; records in all three.
    Yields the fake, the out-of-range parent's id and the merge child's id."""
    fake = FakeKinesis()
    fake.create_stream("orders", shard_count=2)
    for i in range(20):
        fake.put_record("orders", f"parent-{i}", b"p%d" % i)
    low, high = sorted(fake.stream("orders").shards)
    child = fake.merge_shards("orders", low, high)
    for i in range(20):
        fake.put_record("orders", f"child-{i}", b"c%d" % i)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():  # the Consumer's threads call moto at once
        yield fake, low, child


def test_an_out_of_range_parent_whose_shard_end_fails_once_is_ended_later_and_the_merge_child_is_read(
    merged: tuple[FakeKinesis, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, outside, child = merged
    attempts: list[str] = []
    mark_shard_end = TableCalls.mark_shard_end

    async def fails_once(calls: TableCalls, lease: Any, children: Any) -> Any:
        attempts.append(lease.shard_id)
        if lease.shard_id == outside and attempts.count(outside) == 1:  # throttled through a reshard
            raise RetriesExhaustedError("SHARD_END: DynamoDB retries ran out", ThrottledError("throttled"))
        return await mark_shard_end(calls, lease, children)

    monkeypatch.setattr(TableCalls, "mark_shard_end", fails_once)
    wanted = sorted(b"c%d" % i for i in range(20) if hash_key_of(f"child-{i}") in UPPER)
    assert wanted

    async def scenario() -> list[bytes]:
        async with Consumer("orders", application_name="app", region="us-east-1", worker_id="upper",
                            key_range=UPPER, lease_timing=TIMING, handle_signals=False,
                            idle_interval_s=0.05) as consumer:
            got: list[bytes] = []
            while sorted(got) != wanted:
                batch = await consumer.__anext__()
                if batch.shard_id == child:
                    got.extend(r.data for r in batch.records)
                await batch.checkpoint()
            await until(lambda: attempts.count(outside) >= 2, "the second SHARD_END attempt")
            return got

    got = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert sorted(got) == wanted
    assert attempts.count(outside) == 2
    assert not [c for c in fake.calls_to("get_shard_iterator") if c.shard_id == outside]  # never read
