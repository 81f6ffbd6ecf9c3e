"""The fault proxy itself, against the real emulators: every fault kind does what it says, counters count.

Clients are plain botocore ones with botocore's retries off, so each
injected fault is seen exactly as the product's AWS boundary sees it, and
the product's own client (with its retry policy) shows that the fault is
survivable where it should be.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path

import boto3
import botocore.config
import botocore.exceptions
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import (  # noqa: E402  (tests/faults has no __init__.py)
    DYNAMODB,
    KINESIS,
    LATENCY,
    LOST_RESPONSE,
    RESET,
    TRUNCATE,
    Fault,
    ProxyPair,
    aws_error,
    transaction_canceled,
)

from kinesis_src import AwsSettings  # noqa: E402
from kinesis_src.aws import KinesisClient  # noqa: E402
from kinesis_src.retry import RetryPolicy  # noqa: E402

pytestmark = pytest.mark.integration

FAST_RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.02, max_backoff_s=0.2)
NO_RETRIES = botocore.config.Config(retries={"total_max_attempts": 1}, read_timeout=10, connect_timeout=2)


@pytest.fixture
def proxies(emulator_env):
    with ProxyPair(emulator_env, seed=7) as pair:
        yield pair


def raw_kinesis(url: str):
    return boto3.client("kinesis", endpoint_url=url, region_name="us-east-1", config=NO_RETRIES,
                        aws_access_key_id="test", aws_secret_access_key="test")


def raw_dynamodb(url: str):
    return boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", config=NO_RETRIES,
                        aws_access_key_id="test", aws_secret_access_key="test")


def test_passthrough_and_request_counters(proxies, stream_name) -> None:
    client = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=proxies.kinesis.url, retry=FAST_RETRY))
    client.create_stream(stream_name, 1)
    client.wait_active(stream_name)
    client.put_records(stream_name, [(f"k{i}", f"k{i}:1".encode()) for i in range(20)])
    raw = raw_kinesis(proxies.kinesis.url)
    it = raw.get_shard_iterator(StreamName=stream_name, ShardId="shardId-000000000000",
                                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert len(raw.get_records(ShardIterator=it)["Records"]) == 20
    assert proxies.kinesis.plan.requests[KINESIS + "GetRecords"] == 1
    assert proxies.kinesis.plan.requests[KINESIS + "CreateStream"] == 1


def test_aws_errors_next_n_calls_are_retried_by_the_product(proxies, stream_name) -> None:
    client = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=proxies.kinesis.url, retry=FAST_RETRY))
    client.create_stream(stream_name, 1)
    client.wait_active(stream_name)
    raw = raw_kinesis(proxies.kinesis.url)
    for code, status in [("ProvisionedThroughputExceededException", 400), ("LimitExceededException", 400),
                         ("ExpiredIteratorException", 400), ("InternalFailure", 500), ("ServiceUnavailable", 503)]:
        proxies.add(aws_error(code, [KINESIS + "ListShards"], code, status=status, count=1))
        with pytest.raises(botocore.exceptions.ClientError) as error:
            raw.list_shards(StreamName=stream_name)
        assert error.value.response["Error"]["Code"] == code
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
        assert raw.list_shards(StreamName=stream_name)["Shards"]  # count=1: the next call passes
    proxies.add(aws_error("pte3", [KINESIS + "ListShards"], "ProvisionedThroughputExceededException", count=3))
    assert len(client.list_shards(stream_name)) == 1  # the product retried through three of them
    assert proxies.kinesis.plan.injected("pte3") == 3


def test_probability_and_burst(proxies, stream_name) -> None:
    client = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=proxies.kinesis.url, retry=FAST_RETRY))
    client.create_stream(stream_name, 1)
    client.wait_active(stream_name)
    raw = raw_kinesis(proxies.kinesis.url)
    proxies.add(aws_error("half", [KINESIS + "DescribeStreamSummary"], "LimitExceededException", probability=0.5))
    outcomes = []
    for _ in range(60):
        try:
            raw.describe_stream_summary(StreamName=stream_name)
            outcomes.append(True)
        except botocore.exceptions.ClientError:
            outcomes.append(False)
    assert 10 <= outcomes.count(False) <= 50 and proxies.kinesis.plan.injected("half") == outcomes.count(False)
    proxies.clear()
    burst = proxies.add(aws_error("burst", [KINESIS], "LimitExceededException", duration_s=0.5))  # prefix match
    with pytest.raises(botocore.exceptions.ClientError):
        raw.describe_stream_summary(StreamName=stream_name)
    deadline = time.monotonic() + 5
    while time.monotonic() < burst.added_at + 0.5:
        assert time.monotonic() < deadline
        time.sleep(0.05)  # a burst is defined by wall time: this waits for it to end, not for a condition
    assert raw.describe_stream_summary(StreamName=stream_name)


def _raw_post(url: str, target: str, body: bytes) -> http.client.HTTPResponse:
    host, port = url.split("://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/", body=body, headers={
        "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1", "X-Amz-Date": "20240101T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/kinesis/aws4_request, "
                         "SignedHeaders=host;x-amz-date, Signature=0"})
    return conn.getresponse()


@pytest.mark.parametrize("kind", [RESET, TRUNCATE])
def test_broken_bodies(proxies, stream_name, kind) -> None:
    """RESET: headers and half the body, then RST. TRUNCATE: the full Content-Length announced, half sent, FIN."""
    client = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=proxies.kinesis.url, retry=FAST_RETRY))
    client.create_stream(stream_name, 1)
    client.wait_active(stream_name)
    body = json.dumps({"StreamName": stream_name}).encode()
    proxies.add(Fault(kind, kind, (KINESIS + "DescribeStreamSummary",), count=1))
    with pytest.raises((http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionResetError)) as error:
        # an RST may overtake the bytes sent before it: then even the status line is lost
        response = _raw_post(proxies.kinesis.url, KINESIS + "DescribeStreamSummary", body)
        assert response.status == 200
        response.read()
    if kind == TRUNCATE:
        assert isinstance(error.value, http.client.IncompleteRead) and error.value.partial
    response = _raw_post(proxies.kinesis.url, KINESIS + "DescribeStreamSummary", body)
    assert json.loads(response.read())["StreamDescriptionSummary"]["StreamName"] == stream_name


def test_product_retries_through_connection_resets(proxies, stream_name) -> None:
    client = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=proxies.kinesis.url, retry=FAST_RETRY))
    client.create_stream(stream_name, 1)
    client.wait_active(stream_name)
    proxies.add(Fault("reset", RESET, (KINESIS + "ListShards",), count=2))
    proxies.add(Fault("lost", LOST_RESPONSE, (KINESIS + "ListShards",), count=1))
    assert len(client.list_shards(stream_name)) == 1
    assert proxies.kinesis.plan.summary() == {"reset": 2, "lost": 1}


def test_latency(proxies, stream_name) -> None:
    raw = raw_kinesis(proxies.kinesis.url)
    proxies.add(Fault("slow", LATENCY, (KINESIS + "ListStreams",), delay_s=1.0, count=1))
    began = time.monotonic()
    raw.list_streams()
    assert time.monotonic() - began >= 1.0
    began = time.monotonic()
    raw.list_streams()
    assert time.monotonic() - began < 1.0


def test_lost_response_lands_the_write(proxies, stream_name) -> None:
    table = f"faults-{stream_name}"[:200]
    raw = raw_dynamodb(proxies.dynamodb.url)
    if table not in raw.list_tables()["TableNames"]:
        raw.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
    proxies.add(Fault("lost", LOST_RESPONSE, (DYNAMODB + "PutItem",), count=1))
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        raw.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"N": "1"}},
                     ConditionExpression="attribute_not_exists(pk)")
    assert raw.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]["v"] == {"N": "1"}
    assert proxies.dynamodb.plan.injected("lost") == 1


def test_dynamodb_errors_have_the_service_shape(proxies, stream_name) -> None:
    raw = raw_dynamodb(proxies.dynamodb.url)
    proxies.add(aws_error("thr", [DYNAMODB + "ListTables"], "ThrottlingException", count=1))
    with pytest.raises(botocore.exceptions.ClientError) as error:
        raw.list_tables()
    assert error.value.response["Error"]["Code"] == "ThrottlingException"
    proxies.add(transaction_canceled("conflict", "TransactionConflict", actions=2, count=1))
    with pytest.raises(botocore.exceptions.ClientError) as error:
        raw.transact_write_items(TransactItems=[
            {"Put": {"TableName": "x", "Item": {"pk": {"S": "a"}}}},
            {"Put": {"TableName": "x", "Item": {"pk": {"S": "b"}}}},
        ])
    assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in error.value.response["CancellationReasons"]] == ["TransactionConflict", "None"]
    proxies.add(aws_error("inprog", [DYNAMODB + "TransactWriteItems"], "TransactionInProgressException", count=1))
    with pytest.raises(botocore.exceptions.ClientError) as error:
        raw.transact_write_items(TransactItems=[{"Put": {"TableName": "x", "Item": {"pk": {"S": "a"}}}}])
    assert error.value.response["Error"]["Code"] == "TransactionInProgressException"
