"""A heartbeat's or a claim's ``ttl`` is on DynamoDB's clock as seen by the client that writes it.

On the Consumer's loop every write goes through the async client: the table's own botocore client
may never have had an answer, so its Date header cannot be the one the ``ttl`` is judged by
(docs/leases.md, "TTL on DynamoDB's clock")."""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.in_place import run_sync
from kinesis_src.leases.table import LeaseTable
from lineage import KeyRange

TABLE = "leases-ttl"
AHEAD_S = 10 * 86400  # the server's clock, as the writing client saw it, is ten days ahead of this host's


class AheadClient(BotocoreDynamoDB):
    """A client whose last answer said DynamoDB's time is ``AHEAD_S`` past this host's."""

    def server_time_s(self) -> float:
        return time.time() + AHEAD_S


@pytest.fixture
def settings(dummy_credentials: None) -> Iterator[AwsSettings]:
    with mock_aws():
        settings = AwsSettings(region="us-east-1")
        LeaseTable(DynamoDBClient(settings), TABLE, "app", "orders").ensure_table()
        yield settings


def stored_ttl(pk: str, sk: str) -> int:
    plain = boto3.client("dynamodb", region_name="us-east-1")
    return int(plain.get_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}},
                              ConsistentRead=True)["Item"]["ttl"]["N"])


def test_a_heartbeat_takes_its_ttl_from_the_clock_of_the_client_that_writes_it(settings: AwsSettings) -> None:
    table = LeaseTable(DynamoDBClient(settings), TABLE, "app", "orders")  # its own client: no answer yet
    writer = AheadClient(DynamoDBClient(settings))
    me = run_sync(table.aregister_worker(writer, "w1"))
    registered = stored_ttl(table.partition, "worker#w1")
    run_sync(table.aheartbeat(writer, me))
    renewed = stored_ttl(table.partition, "worker#w1")
    for ttl in (registered, renewed):
        assert ttl >= time.time() + AHEAD_S + 23 * 3600


def test_a_key_range_claim_takes_its_ttl_from_the_clock_of_the_client_that_writes_it(settings: AwsSettings) -> None:
    claims = RangeClaims(DynamoDBClient(settings), TABLE, "app", "orders", failover_s=3.0)
    writer = AheadClient(DynamoDBClient(settings))
    run_sync(claims.aclaim(writer, "w1", KeyRange.slice(0, 2)))
    claimed = stored_ttl(claims.partition, "claim#w1")
    assert run_sync(claims.arenew(writer))
    renewed = stored_ttl(claims.partition, "claim#w1")
    for ttl in (claimed, renewed):
        assert ttl >= time.time() + AHEAD_S + 23 * 3600
