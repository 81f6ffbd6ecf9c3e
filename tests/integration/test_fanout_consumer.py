"""The Consumer with ``consumer_mode="efo"``: real LocalStack for Kinesis, DynamoDB Local for leases.

The same checks as the polling Consumer's KPL tests (tests/integration/test_kpl_readers.py): a mix of
plain records and KPL aggregates through a split and a merge, every user record exactly once, in
per-key order, at its own position; and a restart resuming inside an aggregate. What EFO adds: the
stream consumer is registered at start (idempotently: two workers share it), subscriptions are
reopened where the cursor stands, and ``require_consumer_deregistration`` deregisters it at close.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kpl import aggregate, check_user_records, produce_through_split_and_merge
from readers import QUIET_S, deliver  # tests/readers.py

from kinesis_src import Consumer, LeaseTiming, Record
from kinesis_src.aws import FanOut, KinesisClient
from kinesis_src.errors import ConfigurationError, FanOutUnsupportedError
from kinesis_src.testing import LOADED_RETRY

pytestmark = pytest.mark.integration

TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


def consumer(stream: str, application: str, localstack: str, emulators: Any, **extra: Any) -> Consumer:
    return Consumer(
        stream, application_name=application, endpoint_url=localstack,
        dynamodb_endpoint_url=emulators.dynamodb_endpoint, lease_timing=TIMING, handle_signals=False,
        consumer_mode="efo", retry=LOADED_RETRY, **extra,
    )


def consumers_of(kinesis: KinesisClient, stream: str) -> list[str]:
    arn = kinesis.describe_stream(stream).arn
    return sorted(c.name for c in FanOut(kinesis).list_consumers(arn))


def test_efo_delivers_each_user_record_once_in_key_order_through_a_split_and_a_merge(
    localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)

    async def run() -> tuple[list[Record], Any, int]:
        async with consumer(stream_name, "efo-all", localstack, emulators) as worker:
            assert worker.fan_out is not None and worker.fan_out.consumer_name == "efo-all"
            records = await deliver(worker, producer.total)
            return records, worker.metrics.snapshot(), len(worker.held_shards())

    records, metrics, _ = asyncio.run(run())
    check_user_records(records, producer)
    aggregates = sum(n for kind, n in producer.kinds.items() if kind != "plain")
    assert (metrics.aggregates, metrics.aggregates_malformed) == (aggregates, 0)
    assert consumers_of(localstack_kinesis, stream_name) == ["efo-all"]  # kept: deregistration is opt-in


def test_efo_restart_resumes_inside_an_aggregate_and_deregisters_on_request(
    localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str
) -> None:
    """Aggregate A (5 user records) then plain P: the first worker acknowledges up to A's second user
    record and closes; the second (require_consumer_deregistration) resumes at A's third, and its
    close removes the consumer from the stream."""
    localstack_kinesis.create_stream(stream_name, 1)
    localstack_kinesis.wait_active(stream_name)
    data = [f"k:{n}".encode() for n in range(6)]
    localstack_kinesis.put_records(stream_name, [("k", aggregate([("k", None, d) for d in data[:5]]))])
    localstack_kinesis.put_records(stream_name, [("k", data[5])])

    async def first() -> list[Record]:
        async with consumer(stream_name, "efo-restart", localstack, emulators) as worker:
            batch = await asyncio.wait_for(worker.__anext__(), QUIET_S)
            await batch.checkpoint(batch.records[1])
            return list(batch.records)

    async def second() -> list[Record]:
        async with consumer(
            stream_name, "efo-restart", localstack, emulators, require_consumer_deregistration=True
        ) as worker:
            return await deliver(worker, 4)

    seen = asyncio.run(first())
    assert [(r.data, r.sub_sequence_number) for r in seen[:2]] == [(data[0], 0), (data[1], 1)]
    assert consumers_of(localstack_kinesis, stream_name) == ["efo-restart"]
    rest = asyncio.run(second())
    assert [(r.data, r.sub_sequence_number) for r in rest] == [(data[2], 2), (data[3], 3), (data[4], 4), (data[5], 0)]
    assert consumers_of(localstack_kinesis, stream_name) == []


def test_efo_options_are_checked_before_anything_starts() -> None:
    with pytest.raises(ConfigurationError, match="consumer_mode 'fan-out' is not a consumer mode"):
        Consumer("s", application_name="a", region="us-east-1", consumer_mode="fan-out")
    with pytest.raises(ConfigurationError, match="consumer_name 'my app' is not a valid stream consumer name"):
        Consumer("s", application_name="a", region="us-east-1", consumer_mode="efo", consumer_name="my app")
    with pytest.raises(ConfigurationError, match="apply to enhanced fan-out only"):
        Consumer("s", application_name="a", region="us-east-1", consumer_name="billing")


def test_efo_against_an_endpoint_without_it_fails_naming_the_endpoint_and_the_fix(
    kinesis: KinesisClient, emulators: Any, stream_name: str
) -> None:
    """kinesis-mock registers consumers but cannot serve SubscribeToShard to botocore."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    kinesis.put_records(stream_name, [("k", b"x")])

    async def run() -> None:
        async with consumer(stream_name, "efo-unsupported", kinesis.endpoint, emulators) as worker:
            await asyncio.wait_for(worker.__anext__(), QUIET_S)

    with pytest.raises(FanOutUnsupportedError) as failed:
        asyncio.run(run())
    assert kinesis.endpoint in str(failed.value) and "consumerMode=polling" in str(failed.value)
