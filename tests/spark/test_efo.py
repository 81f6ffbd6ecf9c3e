"""The Spark source with ``consumerMode=efo``: tasks read over SubscribeToShard on real LocalStack.

Kinesis is LocalStack's (kinesis-mock cannot serve SubscribeToShard to botocore), the progress
and lease table DynamoDB Local's. The workload is the KPL mix through a split and a merge
(tests/kpl.py). Checked: a batch read and an AvailableNow query deliver every user record exactly
once in per-key order; the consumer is registered by the driver (named after applicationName
unless consumerName says otherwise) and, with requireConsumerDeregistration, removed when the
query stops. Two queries per test at most: each costs seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kpl import check_user_records, produce_through_split_and_merge, records_of_rows
from readers import available_now_batches  # tests/readers.py

from waiting import wait_for

from kinesis_src.aws import FanOut, KinesisClient

pytestmark = pytest.mark.integration


def consumers_of(kinesis: KinesisClient, stream: str) -> list[str]:
    return sorted(c.name for c in FanOut(kinesis).list_consumers(kinesis.describe_stream(stream).arn))


def endpoints(localstack: str, emulators: Any) -> dict[str, str]:
    return {"endpointUrl": localstack, "dynamodbEndpointUrl": emulators.dynamodb_endpoint}


def test_a_batch_read_over_efo_reads_every_user_record_in_lineage_order(
    spark, localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)
    reader = spark.read.format("kinesis").option("streamName", stream_name).option("consumerMode", "efo")
    for key, value in {**endpoints(localstack, emulators), "consumerName": "efo-batch"}.items():
        reader = reader.option(key, value)
    rows = records_of_rows(reader.load().collect())
    check_user_records(rows, producer, hash_keys=False)
    assert consumers_of(localstack_kinesis, stream_name) == ["efo-batch"]


def test_an_available_now_query_over_efo_is_exactly_once_and_deregisters_on_request(
    spark, localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str, tmp_path: Path
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)
    options = {
        **endpoints(localstack, emulators), "streamName": stream_name, "initialPosition": "trim_horizon",
        "applicationName": f"efo-{stream_name}"[:100], "consumerMode": "efo", "maxRecordsPerShard": "7",
        "requireConsumerDeregistration": "true",
    }
    batches = available_now_batches(spark, options, tmp_path / "checkpoint")
    check_user_records([r for rows in batches for r in rows], producer, hash_keys=False)  # no hash-key column
    assert len(batches) > 1  # maxRecordsPerShard=7 splits the read into several micro-batches
    # Spark stops the source after the query ends, not before awaitTermination returns: wait for it.
    wait_for(lambda: consumers_of(localstack_kinesis, stream_name) == [], 30, "the consumer's deregistration", 0.5)
