"""Compatibility with LocalStack itself (host mode, no Docker): the polling paths through a split and a merge.

Users test their pipelines against LocalStack, so each engine's default
(polling) path runs on it here, on the same workload as the EFO tests (the
KPL mix through a split and a merge, tests/kpl.py): Kinesis is LocalStack's,
the lease table DynamoDB Local's (LocalStack's own DynamoDB needs Java 21
and a download at start; see docs/localstack.md). The Spark scenario is in
tests/spark/test_localstack_query.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kpl import check_user_records, produce_through_split_and_merge, records_of_table
from readers import deliver  # tests/readers.py

from kinesis_src import Consumer, LeaseTiming, Record, read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.testing import LOADED_RETRY, decode

pytestmark = pytest.mark.integration

TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


def test_the_polling_consumer_on_localstack_delivers_every_record_once_in_key_order(
    localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)

    async def run() -> list[Record]:
        async with Consumer(
            stream_name, application_name="compat", endpoint_url=localstack,
            dynamodb_endpoint_url=emulators.dynamodb_endpoint, lease_timing=TIMING, handle_signals=False,
            idle_interval_s=0.2, retry=LOADED_RETRY,
        ) as worker:
            return await deliver(worker, producer.total)

    check_user_records(asyncio.run(run()), producer)


def test_a_bounded_read_on_localstack_reads_parents_before_children(
    localstack_kinesis: KinesisClient, stream_name: str
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)
    records = records_of_table(read_table(stream_name, kinesis=localstack_kinesis, progress=False))
    check_user_records(records, producer, hash_keys=False)
    assert {decode(r.data)[0] for r in records}  # keyed-counter data throughout
