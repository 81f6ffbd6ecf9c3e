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
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAILOVER, RENEW = 3.0, 1.0
RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0)
_ids = itertools.count()
WHOLE = HashRange(0, MAX_HASH_KEY)


@pytest.fixture(name="dynamodb")
def dynamodb_fixture(emulator_env: dict[str, str]) -> DynamoDBClient:
    return DynamoDBClient(AwsSettings.from_env(retry=RETRY))


@pytest.fixture(name="table_name")
def table_name_fixture() -> str:
    return f"leases-{uuid.uuid4().hex[:8]}-{next(_ids)}"


def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)


def held_lease(table: LeaseTable, shard_id: str, owner: str) -> Lease:
    """A new lease on ``shard_id`` (TRIM_HORIZON, the whole hash range), taken by ``owner``."""
    assert table.create_lease(Lease(shard_id, Checkpoint.trim_horizon(), WHOLE))
    taken = table.take_lease(table.get_lease(shard_id), owner)  # type: ignore[arg-type]
    assert taken is not None
    return taken


def stored_lease(dynamodb: DynamoDBClient, table: LeaseTable, shard_id: str) -> dict[str, object]:
    """The lease item as stored, less what differs between two shards' leases by design."""
    item = dynamodb.get_item(table.table_name, table._lease_key(shard_id)) or {}
    return {k: v for k, v in item.items() if k not in ("sk", "shardId", "lastUpdated")}
