"""StreamRef: ARNs parsed in one place; a stream given by ARN is called by StreamARN (cross-account)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from botocore.stub import Stubber

from kinesis_src.aws import KinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import ConfigurationError, StreamNotFoundError
from kinesis_src.positions import Position
from kinesis_src.retry import RetryPolicy
from kinesis_src.stream_ref import StreamRef, parse_list

pytestmark = pytest.mark.usefixtures("dummy_credentials")  # never real ones, even though the Stubber answers
ARN = "arn:aws:kinesis:eu-west-1:444455556666:stream/payments"
FAST = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
SHARD = {
    "ShardId": "shardId-000000000000",
    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(2**128 - 1)},
    "SequenceNumberRange": {"StartingSequenceNumber": "1"},
}
SUMMARY = {
    "StreamDescriptionSummary": {
        "StreamName": "payments", "StreamARN": ARN, "StreamStatus": "ACTIVE", "RetentionPeriodHours": 24,
        "StreamCreationTimestamp": datetime(2026, 1, 1, tzinfo=timezone.utc), "EnhancedMonitoring": [],
        "OpenShardCount": 1,
    }
}


def stubbed() -> tuple[KinesisClient, Stubber]:
    kinesis = KinesisClient(AwsSettings(region="eu-west-1", endpoint_url="http://127.0.0.1:1", retry=FAST))
    return kinesis, Stubber(kinesis.botocore_client)


def test_an_arn_is_parsed_once_into_name_region_and_account() -> None:
    ref = StreamRef.parse_arn(ARN)
    assert (ref.name, ref.region, ref.account, ref.arn) == ("payments", "eu-west-1", "444455556666", ARN)
    assert ref.api_args() == {"StreamARN": ARN} and ref.target is ref
    assert repr(ref) == repr(ARN) and str(ref) == ARN  # messages format streams with !r
    by_name = StreamRef.by_name("orders")
    assert by_name.api_args() == {"StreamName": "orders"} and by_name.target == "orders"


@pytest.mark.parametrize("text", [
    "payments",
    "arn:aws:kinesis:eu-west-1:4444:stream/payments",  # the account is 12 digits
    "arn:aws:kinesis:eu-west-1:444455556666:payments",
    "arn:aws:firehose:eu-west-1:444455556666:deliverystream/payments",
    "arn:aws:kinesis:eu-west-1:444455556666:stream/pay ments",
    f"{ARN}/consumer/app:1",  # a consumer ARN is not a stream ARN
])
def test_what_is_not_a_stream_arn_fails_naming_the_option_and_the_form(text: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        StreamRef.parse_arn(text, "streamARN")
    assert "'streamARN'" in str(failed.value) and "arn:aws:kinesis:" in str(failed.value)


def test_a_list_keeps_its_order_and_refuses_a_stream_twice() -> None:
    refs = parse_list(f"orders, {ARN}", "streamARN", lambda t, o: StreamRef.parse_arn(t, o) if t.startswith("arn:")
                      else StreamRef.by_name(t, o))
    assert [r.name for r in refs] == ["orders", "payments"]
    with pytest.raises(ConfigurationError, match="'payments' twice"):
        parse_list(f"{ARN},{ARN.replace('444455556666', '111122223333')}", "streamARN", StreamRef.parse_arn)


def test_a_stream_given_by_arn_is_described_listed_and_read_by_stream_arn() -> None:
    kinesis, stub = stubbed()
    ref = StreamRef.parse_arn(ARN)
    stub.add_response("describe_stream_summary", SUMMARY, {"StreamARN": ARN})
    stub.add_response("list_shards", {"Shards": [SHARD]}, {"StreamARN": ARN, "MaxResults": 1000})
    stub.add_response(
        "get_shard_iterator", {"ShardIterator": "it"},
        {"StreamARN": ARN, "ShardId": "shardId-000000000000", "ShardIteratorType": "TRIM_HORIZON"},
    )
    with stub:
        assert kinesis.describe_stream(ref).arn == ARN
        discovery = ShardDiscovery(kinesis, ref.target)
        discovery.refresh()
        assert discovery.graph.shard_ids() == ["shardId-000000000000"]
        assert kinesis.get_shard_iterator(ref, "shardId-000000000000", Position.trim_horizon()) == "it"
    stub.assert_no_pending_responses()


def test_a_stream_given_by_name_is_still_called_by_name() -> None:
    kinesis, stub = stubbed()
    stub.add_response("list_shards", {"Shards": [SHARD]}, {"StreamName": "orders", "MaxResults": 1000})
    with stub:
        assert [s["ShardId"] for s in kinesis.list_shards(StreamRef.by_name("orders"))] == ["shardId-000000000000"]
    stub.assert_no_pending_responses()


def test_a_missing_stream_given_by_arn_is_named_by_its_arn() -> None:
    kinesis, stub = stubbed()
    stub.add_client_error("describe_stream_summary", "ResourceNotFoundException", "not found", 400,
                          expected_params={"StreamARN": ARN})
    with stub, pytest.raises(StreamNotFoundError) as missing:
        kinesis.describe_stream(StreamRef.parse_arn(ARN))
    assert ARN in str(missing.value)


def test_a_spark_task_reads_a_stream_given_by_arn_by_its_arn() -> None:
    """Cross-account streams are only reachable by ARN: the task's calls must carry StreamARN, not the name."""
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice
    from kinesis_src.spark.tasks import shard_reader

    kinesis, stub = stubbed()
    piece = ShardSlice("shardId-000000000000", Position.trim_horizon().to_dict())
    partition = KinesisPartition(
        0, "payments", Endpoint("eu-west-1", "http://127.0.0.1:1", None), (piece,), stream_ref=StreamRef.parse_arn(ARN)
    )
    stub.add_response(
        "get_shard_iterator", {"ShardIterator": "it"},
        {"StreamARN": ARN, "ShardId": "shardId-000000000000", "ShardIteratorType": "TRIM_HORIZON"},
    )
    with stub:
        assert shard_reader(kinesis, partition, piece)._new_iterator() == "it"
    stub.assert_no_pending_responses()
