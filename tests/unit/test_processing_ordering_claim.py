"""One ordering mode per application and stream (kinesis_src/consumer/processing/ordering_claim.py), on moto."""

from __future__ import annotations

import pytest
from moto import mock_aws

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.processing.options import Ordering
from kinesis_src.consumer.processing.ordering_claim import claim_ordering as aclaim_ordering
from kinesis_src.consumer.processing.ordering_claim import ordering_key
from kinesis_src.errors import ConfigurationError
from kinesis_src.in_place import run_sync
from kinesis_src.leases.table import LeaseTable
from kinesis_src.retry import RetryPolicy

TABLE = "kinesis-src-app"


def claim_ordering(dynamodb: DynamoDBClient, *args: object) -> None:
    run_sync(aclaim_ordering(BotocoreDynamoDB(dynamodb), *args))  # type: ignore[arg-type]


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.01)))
        LeaseTable(client, TABLE, "app", "orders").ensure_table(create=True)
        yield client


def test_the_first_worker_records_its_mode_and_workers_with_the_same_mode_pass(dynamodb: DynamoDBClient) -> None:
    claim_ordering(dynamodb, TABLE, "app", "orders", Ordering.KEY, "w1")
    claim_ordering(dynamodb, TABLE, "app", "orders", Ordering.KEY, "w2")
    item = dynamodb.get_item(TABLE, ordering_key("app", "orders"))
    assert item is not None and (item["ordering"]["S"], item["workerId"]["S"]) == ("key", "w1")


def test_another_mode_fails_naming_the_first_one_and_who_recorded_it(dynamodb: DynamoDBClient) -> None:
    claim_ordering(dynamodb, TABLE, "app", "orders", Ordering.SHARD, "w1")
    with pytest.raises(ConfigurationError, match=r"ordering='unordered' conflicts with ordering='shard'.*recorded by w1"):
        claim_ordering(dynamodb, TABLE, "app", "orders", Ordering.UNORDERED, "w2")


def test_each_application_and_stream_has_its_own_mode(dynamodb: DynamoDBClient) -> None:
    claim_ordering(dynamodb, TABLE, "app", "orders", Ordering.KEY, "w1")
    claim_ordering(dynamodb, TABLE, "app", "payments", Ordering.UNORDERED, "w1")
    claim_ordering(dynamodb, TABLE, "other-app", "orders", Ordering.SHARD, "w1")
    modes = {(app, stream): dynamodb.get_item(TABLE, ordering_key(app, stream))["ordering"]["S"]
             for app, stream in (("app", "orders"), ("app", "payments"), ("other-app", "orders"))}
    assert modes == {("app", "orders"): "key", ("app", "payments"): "unordered", ("other-app", "orders"): "shard"}
