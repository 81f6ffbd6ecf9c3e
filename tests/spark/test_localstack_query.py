"""The Spark source on LocalStack itself (host mode): a polling AvailableNow query through a split and a merge.

The same workload and checks as the EFO query in test_efo.py, on the
default polling path: every user record exactly once, in per-key order,
across several micro-batches. Kinesis is LocalStack's, the lease table
DynamoDB Local's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kpl import check_user_records, produce_through_split_and_merge
from readers import available_now_batches  # tests/readers.py

from kinesis_src.aws import KinesisClient

pytestmark = pytest.mark.integration


def test_a_polling_query_on_localstack_is_exactly_once_in_key_order(
    spark, localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str, tmp_path: Path
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)
    options = {
        "endpointUrl": localstack, "dynamodbEndpointUrl": emulators.dynamodb_endpoint, "streamName": stream_name,
        "initialPosition": "trim_horizon", "applicationName": f"compat-{stream_name}"[:100], "maxRecordsPerShard": "7",
    }
    batches = available_now_batches(spark, options, tmp_path / "checkpoint")
    check_user_records([r for rows in batches for r in rows], producer, hash_keys=False)
    assert len(batches) > 1
