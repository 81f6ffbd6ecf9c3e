"""Spark source options: bad values fail at parse time, naming the option and the fix (no SparkSession)."""

from __future__ import annotations

import pytest

from kinesis_src.errors import ConfigurationError
from kinesis_src.spark.options import parse_options

BASE = {"streamName": "orders", "region": "us-east-1"}


def _parse(batch: bool | None = None, **options: str):
    return parse_options({**BASE, **options}, batch=batch, environ={})


def test_base_options_parse() -> None:
    parsed = _parse()
    assert parsed.stream_name == "orders" and parsed.region == "us-east-1"


@pytest.mark.parametrize(
    "option, value",
    [
        ("streamName", "orders\n"),
        ("streamName", " orders"),
        ("region", "us-east-1\n"),
        ("failOnDataLoss", "true\n"),
        ("preserveShardOrder", " false"),
        ("maxRecordsPerFetch", "100\n"),
        ("initialPosition", "latest\r\n"),
        ("applicationName", "app\t"),
        ("endpointUrl", "http://127.0.0.1:4566\n"),
        ("startingTimestamp", "2026-01-31T12:00:00Z\n"),
        ("leaseTableName", "lea\x00ses"),
        ("streamName", "ord\x1bers"),
    ],
)
def test_whitespace_and_control_characters_are_rejected(option: str, value: str) -> None:
    options = {option: value, "initialPosition": "at_timestamp"} if option == "startingTimestamp" else {option: value}
    with pytest.raises(ConfigurationError) as info:
        _parse(**options)
    message = str(info.value)
    assert f"'{option}'" in message and repr(value) in message
    assert "whitespace" in message and "control character" in message


def test_option_keys_are_case_insensitive_in_the_whitespace_check() -> None:
    with pytest.raises(ConfigurationError, match="'streamName'"):
        parse_options({"STREAMNAME": "orders\n", "region": "us-east-1"}, batch=None, environ={})


@pytest.mark.parametrize("option", ["aws.accessKeyId", "aws.secretAccessKey", "AWS.region", "aws.sessionToken"])
def test_aws_options_are_rejected_pointing_at_the_credential_chain(option: str) -> None:
    secret = "wJalrXUtnFEMI-canary-K7MDENG"
    with pytest.raises(ConfigurationError) as info:
        _parse(**{option: secret})
    message = str(info.value)
    assert option.lower() in message.lower()
    assert "botocore" in message and "AWS_ACCESS_KEY_ID" in message
    assert "streamName" in message  # the supported options are listed
    assert secret not in message



@pytest.mark.parametrize("option", ["endpointUrl", "dynamodbEndpointUrl"])
def test_endpoint_options_with_credentials_are_rejected_without_echoing_them(option: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _parse(**{option: "http://AKIACANARYUSER:canary-s3cr3t@127.0.0.1:4566"})
    message = str(info.value)
    assert f"'{option}'" in message
    assert "canary-s3cr3t" not in message and "AKIACANARYUSER" not in message
