"""close() of a worker without a range that is finishing an orphan split: nothing of it runs on afterwards (#23).

A split whose claimer is gone is finished by a worker without a range, in
the background (``UnitReaders._finish``): it waits for the unit's readers to
leave (up to ten failover times), then rewrites the unit's leases. Once
``close()`` returns, none of that may still be running, or it writes to the
table after the consumer is closed. Here the Consumer runs on moto's DynamoDB
and the fake Kinesis; a reader of an old version that never leaves keeps the
split waiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_harness import until
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws
from waiting import wait_for

import kinesis_src.consumer.unit_readers as unit_readers_module
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name
from kinesis_src.retry import RetryPolicy
from lineage import KeyRange

APP, STREAM = "app", "orders"
TIMING = LeaseTiming(failover_s=30.0, renew_interval_s=0.5, scan_interval_s=0.1)  # the split waits 300 s


class Splits:
    """``finish_split`` as the consumer calls it, counting the calls still running."""

    def __init__(self) -> None:
        self.real = unit_readers_module.finish_split
        self.started = 0
        self.running = 0
        self._lock = threading.Lock()

    async def __call__(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.started += 1
            self.running += 1
        try:
            await self.real(*args, **kwargs)
        finally:
            with self._lock:
                self.running -= 1


@pytest.fixture
def dynamodb(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoDBClient]:
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2)))
        LeaseTable(client, default_table_name(APP), APP, STREAM).ensure_table(create=True)
        yield client


@pytest.fixture
def splits(dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[Splits]:
    """Splits counted while a worker of a version without units reads the whole space: it beats there
    and leaves only at teardown, after which a split still running ends (it never outlives moto)."""
    counting = Splits()
    monkeypatch.setattr(unit_readers_module, "finish_split", counting)
    table = LeaseTable(dynamodb, default_table_name(APP), APP, STREAM)
    me = table.register_worker("old")
    done = threading.Event()

    def beat() -> None:
        nonlocal me
        while not done.wait(0.05):
            _, me = table.heartbeat(me)
        table.deregister_worker(me)

    thread = threading.Thread(target=beat, name="old-heartbeat", daemon=True)
    thread.start()
    yield counting
    done.set()
    thread.join(5)
    wait_for(lambda: counting.running == 0, 10, "the split to end once the old reader left")


def an_orphan_split(dynamodb: DynamoDBClient) -> None:
    """A sticky worker claimed the middle third (recording the split of the whole space), then left."""
    claims = RangeClaims(dynamodb, default_table_name(APP), APP, STREAM, TIMING.failover_s)
    claims.claim("sticky", KeyRange.slice(1, 3))
    claims.release()


def test_close_leaves_no_orphan_split_running(dynamodb: DynamoDBClient, splits: Splits) -> None:
    an_orphan_split(dynamodb)

    async def scenario() -> int:
        consumer = Consumer(STREAM, application_name=APP, region="us-east-1", worker_id="plain",
                            lease_timing=TIMING, handle_signals=False, idle_interval_s=0.05)
        async with consumer:
            await until(lambda: splits.running == 1, "the orphan split to start (it waits for 'old')", 10)
        return splits.running

    loop = asyncio.new_event_loop()  # not asyncio.run: it would wait for a split thread left running
    try:
        still_running = loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    finally:
        loop.close()
    assert splits.started == 1
    assert still_running == 0, "the orphan split was still running (and would write to the table) after close()"
