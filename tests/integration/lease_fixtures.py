"""What the lease integration tests share: a DynamoDB client, a fresh lease table name, an ACTIVE stream.

Imported by tests/integration/test_leases.py (worker processes) and
tests/integration/test_lease_lineage.py (in-process coordinators); a test
module that imports ``dynamodb_fixture`` and ``table_name_fixture`` has the
``dynamodb`` and ``table_name`` fixtures.
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.retry import RetryPolicy

FAILOVER, RENEW = 3.0, 1.0
RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0)
_ids = itertools.count()


@pytest.fixture(name="dynamodb")
def dynamodb_fixture(emulator_env: dict[str, str]) -> DynamoDBClient:
    return DynamoDBClient(AwsSettings.from_env(retry=RETRY))


@pytest.fixture(name="table_name")
def table_name_fixture() -> str:
    return f"leases-{uuid.uuid4().hex[:8]}-{next(_ids)}"


def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)
