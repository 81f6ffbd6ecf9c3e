"""The Consumer's shard sync lists the stream on its event loop, with its async client (issue #25): the
leader's periodic sync was the last call of a running consumer that hopped to a worker thread. The
Consumer runs for real on moto's DynamoDB with the fake Kinesis as its clients."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from consumer_harness import until
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.consumer import Consumer
from kinesis_src.leases.timing import LeaseTiming

TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1, sync_interval_s=0.2)


def test_every_listing_of_the_stream_is_made_on_the_loop_through_a_split(
    dummy_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeKinesis()
    fake.create_stream("orders", shard_count=1)
    (parent,) = fake.stream("orders").shards
    listed_on: list[str] = []
    enter = fake.enter

    def recording(method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "list_shards":
            listed_on.append(threading.current_thread().name)
        return enter(method, *args, **kwargs)

    monkeypatch.setattr(fake, "enter", recording)
    wire_fake(monkeypatch, fake)

    async def scenario() -> set[str]:
        async with Consumer("orders", application_name="app", region="us-east-1", worker_id="w1",
                            lease_timing=TIMING, handle_signals=False, idle_interval_s=0.05) as consumer:
            loop_thread = threading.current_thread().name
            await until(lambda: consumer.held_shards() == [parent], "the parent to be held")
            children = set(fake.split_shard("orders", parent, 2**127))
            fake.put_record("orders", "after-split", b"x")
            seen: set[str] = set()
            while not children & seen:  # the children are leased by a shard sync, then read
                batch = await asyncio.wait_for(consumer.__anext__(), 10)
                seen.add(batch.shard_id)
                await batch.checkpoint()
            await until(lambda: len(listed_on) >= 3, "the leader's periodic shard syncs")
            assert set(listed_on) == {loop_thread}, f"listed on threads {sorted(set(listed_on))}"
            return seen

    with serialized_mock_aws():
        seen = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert seen - {parent}
