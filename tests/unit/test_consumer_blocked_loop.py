"""An application that blocks the Consumer's event loop past the failover time loses its leases (#25).

The heartbeat is a task on the loop, as docs/consumer.md says: a worker whose
``async for`` body holds the loop is judged dead by the others once its
heartbeat stops moving for ``failover_s``, and another worker takes its
shard and delivers the unacknowledged batch again. Nothing is lost, and the
blocked worker's checkpoint, once its loop runs again, writes nothing. The
Consumers run for real on moto's DynamoDB with the fake Kinesis.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from consumer_on_moto import wire_fake
from fake_kinesis import FakeKinesis
from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer import Consumer
from kinesis_src.errors import LeaseLostError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.names import default_table_name

TIMING = LeaseTiming(failover_s=1.0, renew_interval_s=0.25, scan_interval_s=0.1)
RECORDS = [b"r%d" % i for i in range(10)]
DEADLINE_S = 20.0


@pytest.fixture
def fake(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKinesis]:
    fake = FakeKinesis()
    fake.create_stream("orders", shard_count=1)
    for i, data in enumerate(RECORDS):
        fake.put_record("orders", f"k{i}", data)
    wire_fake(monkeypatch, fake)
    with serialized_mock_aws():
        yield fake


def consumer(worker_id: str) -> Consumer:
    return Consumer("orders", application_name="app", region="us-east-1", worker_id=worker_id,
                    lease_timing=TIMING, handle_signals=False, idle_interval_s=0.05, max_records_per_fetch=4)


def test_a_worker_whose_loop_is_blocked_past_the_failover_time_hands_its_shard_over(fake: FakeKinesis) -> None:
    holding, taken_over = threading.Event(), threading.Event()
    blocked: dict[str, object] = {}

    async def blocked_worker() -> None:
        async with consumer("a") as a:
            batch = await asyncio.wait_for(a.__anext__(), DEADLINE_S)
            blocked["records"] = [r.data for r in batch.records]
            holding.set()
            # the application's synchronous work holds the loop: no heartbeat, no cycle, no fetch
            blocked["handed_over"] = taken_over.wait(DEADLINE_S)
            try:
                await batch.checkpoint()
                blocked["checkpoint"] = "written"
            except LeaseLostError:
                blocked["checkpoint"] = "refused"

    thread = threading.Thread(target=lambda: asyncio.run(blocked_worker()), name="blocked-worker")
    thread.start()
    try:
        assert holding.wait(DEADLINE_S), "worker a never delivered its first batch"

        async def survivor() -> list[bytes]:
            got: list[bytes] = []
            async with consumer("b") as b:
                while sorted(got) != sorted(RECORDS):
                    batch = await asyncio.wait_for(b.__anext__(), DEADLINE_S)
                    got.extend(r.data for r in batch.records)
                    await batch.checkpoint()
                taken_over.set()
            return got

        got = asyncio.run(survivor())
    finally:
        taken_over.set()
        thread.join(DEADLINE_S)
    assert blocked["handed_over"], "worker b took the shard only after a's loop ran again"
    assert sorted(got) == sorted(RECORDS)  # nothing lost: b read the shard from the start
    assert set(blocked["records"]) <= set(got)  # a's unacknowledged batch was delivered again
    assert blocked["checkpoint"] == "refused"  # fenced: the lease moved on while a's loop was held
    assert lease_owner() in (None, "b")


def lease_owner() -> str | None:
    table = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), default_table_name("app"), "app", "orders")
    (lease,) = table.list_leases()
    return lease.owner
