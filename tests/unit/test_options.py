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


def test_consumer_mode_defaults_to_polling_and_efo_names_its_consumer_after_the_application() -> None:
    from kinesis_src.retrieval.registration import ConsumerMode

    assert _parse().consumer_mode is ConsumerMode.POLLING
    efo = _parse(consumerMode="EFO", applicationName="billing")
    assert efo.consumer_mode is ConsumerMode.EFO and efo.consumer_name == "billing"
    assert not efo.require_consumer_deregistration
    named = _parse(False, consumerMode="efo", consumerName="billing-efo", requireConsumerDeregistration="true")
    assert named.consumer_name == "billing-efo" and named.require_consumer_deregistration


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"consumerMode": "fanout"}, "option 'consumerMode' = 'fanout' is not a consumer mode: use 'polling'"),
        ({"consumerMode": "efo", "consumerName": "my consumer"}, "not a valid stream consumer name"),
        ({"consumerMode": "efo", "consumerName": "x" * 129}, "1-128 characters"),
        ({"consumerName": "billing"}, "'consumerName' apply to enhanced fan-out only: add .option('consumerMode', 'efo')"),
        ({"requireConsumerDeregistration": "true"}, "apply to enhanced fan-out only"),
        ({"consumerMode": "efo", "requireConsumerDeregistration": "yes"}, "must be true or false"),
    ],
)
def test_bad_fan_out_options_name_the_option_and_the_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(False, **options)
    assert message in str(failed.value)


def test_consumer_deregistration_is_refused_for_a_batch_read_which_has_no_stop() -> None:
    with pytest.raises(ConfigurationError, match="applies to streaming queries"):
        _parse(True, consumerMode="efo", requireConsumerDeregistration="true")
