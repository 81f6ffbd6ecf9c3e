"""Leases are bound to one stream identity: a stream recreated under the same name is refused, clearly."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator

import boto3
import pytest
from moto import mock_aws

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import CorruptLeaseError, StreamRecreatedError
from kinesis_src.identity import StreamIdentity
from kinesis_src.leases.schema.keys import identity_key
from kinesis_src.leases.stream_binding import bind_stream
from kinesis_src.leases.table import LeaseTable
from kinesis_src.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
CREATED = datetime(2026, 11, 1, tzinfo=timezone.utc)


@pytest.fixture
def table(dummy_credentials: None) -> Iterator[LeaseTable]:
    with mock_aws():
        leases = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST)), "kinesis-src-t", "app", "orders")
        leases.ensure_table()
        yield leases


def test_first_worker_records_the_stream_and_later_ones_agree(table: LeaseTable) -> None:
    identity = StreamIdentity(ARN, CREATED)
    assert bind_stream(table, identity) == identity
    assert bind_stream(table, StreamIdentity(ARN, CREATED)) == identity


def test_a_recreated_stream_is_refused_with_the_way_to_start_over(table: LeaseTable) -> None:
    bind_stream(table, StreamIdentity(ARN, CREATED))
    with pytest.raises(StreamRecreatedError) as info:
        bind_stream(table, StreamIdentity(ARN, CREATED + timedelta(hours=5)))
    message = str(info.value)
    assert "deleted and created again" in message and "new application_name" in message
    assert "lease#app#orders" in message


def test_a_corrupt_identity_item_names_the_attribute(table: LeaseTable) -> None:
    item = {**identity_key("app", "orders"), "streamArn": {"S": ARN}, "streamCreated": {"S": "yesterday"}}
    boto3.client("dynamodb", region_name="us-east-1").put_item(TableName=table.table_name, Item=item)
    with pytest.raises(CorruptLeaseError, match="streamCreated"):
        bind_stream(table, StreamIdentity(ARN, CREATED))


def test_describe_stream_reports_the_identity(dummy_credentials: None) -> None:
    with mock_aws():
        boto3.client("kinesis", region_name="us-east-1").create_stream(StreamName="orders", ShardCount=1)
        summary = KinesisClient(AwsSettings(region="us-east-1", retry=FAST)).describe_stream("orders")
    assert summary.identity is not None and summary.identity.arn == summary.arn
    assert summary.identity.created.tzinfo is not None
