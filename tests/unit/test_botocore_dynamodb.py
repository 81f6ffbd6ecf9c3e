"""Where aiobotocore cannot serve (a moto mock), the Consumer awaits the same calls over botocore."""

from __future__ import annotations

import asyncio

from moto_threads import serialized_mock_aws  # tests/moto_threads.py

from kinesis_src.aws.async_dynamodb import open_async_dynamodb
from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from lineage import HashRange

SHARD = "shardId-000000000001"


def test_under_moto_the_async_calls_run_over_botocore_and_answer_as_the_sync_client(dummy_credentials: None) -> None:
    settings = AwsSettings(region="us-east-1")
    with serialized_mock_aws():
        table = LeaseTable(DynamoDBClient(settings), "leases-unit", "app", "orders")
        table.ensure_table()
        table.create_lease(Lease(SHARD, Checkpoint.trim_horizon(), HashRange(0, 10)))

        async def scenario() -> tuple[object, Lease | None, Lease | None]:
            dynamodb = await open_async_dynamodb(settings)
            async with dynamodb:
                (lease,) = table.list_leases()
                taken = await table.atake_lease(dynamodb, lease, "me")
                again = await table.atake_lease(dynamodb, lease, "you")  # the counter moved: refused
                return dynamodb, taken, again

        dynamodb, taken, again = asyncio.run(scenario())
        assert isinstance(dynamodb, BotocoreDynamoDB)
        assert taken is not None and taken.owner == "me" and again is None
        assert table.get_lease(SHARD).owner == "me"
        assert dynamodb.requests["UpdateItem"] == 2
