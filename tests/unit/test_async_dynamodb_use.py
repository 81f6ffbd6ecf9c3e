"""When the Consumer's checkpoints may go over aiobotocore: never under a running moto mock, never to an
endpoint URL with a path (the synchronous client writes them then)."""

from __future__ import annotations

from moto import mock_aws

from kinesis_src.aws.async_dynamodb import usable
from kinesis_src.config import AwsSettings


def test_usable_on_a_plain_endpoint_and_not_under_a_running_moto_mock() -> None:
    settings = AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:4566")
    assert usable(settings)
    with mock_aws():
        assert not usable(settings)
    assert usable(settings)


def test_not_usable_for_an_endpoint_with_a_path() -> None:
    assert not usable(AwsSettings(region="us-east-1", dynamodb_endpoint_url="http://127.0.0.1:4566/dynamodb"))
