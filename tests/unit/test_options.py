"""Spark source options: bad values fail at parse time, naming the option and the fix (no SparkSession)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from kinesis_src.config import CredentialSource
from kinesis_src.errors import ConfigurationError
from kinesis_src.retrieval.registration import ConsumerMode
from kinesis_src.spark import aliases
from kinesis_src.spark.options import KNOWN_OPTIONS, parse_options

BASE = {"streamName": "orders", "region": "us-east-1"}
MIGRATION = Path(__file__).resolve().parents[2] / "docs" / "migration.md"


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
        ("maxFetchDuration", "10s\n"),
        ("kinesis.startingPosition", " LATEST"),
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

# --- other connectors' names (docs/migration.md) ---------------------------------------------------------------



@pytest.mark.parametrize(
    ("options", "field", "expected"),
    [
        # Databricks
        ({"maxFetchDuration": "2m"}, "max_fetch_duration_ms", 120_000),
        ({"maxFetchDuration": "1500ms"}, "max_fetch_duration_ms", 1_500),
        ({"MAXFETCHDURATION": "10s"}, "max_fetch_duration_ms", 10_000),
        ({"minFetchPeriod": "400ms"}, "fetch_interval_ms", 400),
        ({"minFetchPeriod": "1s"}, "fetch_interval_ms", 1_000),
        ({"endpoint": "https://kinesis.us-east-1.amazonaws.com"}, "endpoint_url",
         "https://kinesis.us-east-1.amazonaws.com"),
        # awslabs spark-sql-kinesis-connector
        ({"kinesis.endpointUrl": "http://127.0.0.1:4566"}, "endpoint_url", "http://127.0.0.1:4566"),
        ({"kinesis.consumerType": "SubscribeToShard"}, "consumer_mode", ConsumerMode.EFO),
        ({"kinesis.consumerType": "GetRecords"}, "consumer_mode", ConsumerMode.POLLING),
        ({"Kinesis.ConsumerType": "getrecords"}, "consumer_mode", ConsumerMode.POLLING),
        ({"kinesis.consumerType": "SubscribeToShard", "kinesis.consumerName": "billing"}, "consumer_name", "billing"),
        ({"kinesis.failOnDataLoss": "false"}, "fail_on_data_loss", False),
        ({"kinesis.maxFetchRecordsPerShard": "500"}, "max_records_per_shard", 500),
        ({"kinesis.maxFetchTimePerShardSec": "30"}, "max_fetch_duration_ms", 30_000),
        ({"kinesis.getRecords.numberOfRecordsPerFetch": "250"}, "max_records_per_fetch", 250),
        ({"kinesis.getRecords.fetchIntervalMs": "1000"}, "fetch_interval_ms", 1_000),
    ],
)
def test_an_alias_sets_our_option(options: dict[str, str], field: str, expected: object) -> None:
    assert getattr(_parse(**options), field) == expected


@pytest.mark.parametrize("option", ["kinesis.streamName", "KINESIS.STREAMNAME"])
def test_awslabs_stream_and_region_names_stand_for_ours(option: str) -> None:
    parsed = parse_options({option: "orders", "kinesis.region": "eu-west-1"}, batch=None, environ={})
    assert parsed.stream_name == "orders" and parsed.region == "eu-west-1"
    parsed = parse_options({"streamName": "orders", "kinesis.kinesisRegion": "eu-west-1"}, batch=None, environ={})
    assert parsed.region == "eu-west-1"


@pytest.mark.parametrize(
    ("value", "kind", "timestamp"),
    [
        ("LATEST", "LATEST", None),
        ("TRIM_HORIZON", "TRIM_HORIZON", None),
        ("EARLIEST", "TRIM_HORIZON", None),
        ("AT_TIMESTAMP 2023-08-30T19:00:05Z", "AT_TIMESTAMP", datetime(2023, 8, 30, 19, 0, 5, tzinfo=timezone.utc)),
        ("at_timestamp 2023-08-30T19:00:05-08:00", "AT_TIMESTAMP", datetime(2023, 8, 31, 3, 0, 5, tzinfo=timezone.utc)),
    ],
)
def test_awslabs_starting_position_becomes_initial_position(value: str, kind: str, timestamp: datetime | None) -> None:
    position = _parse(False, **{"kinesis.startingPosition": value}).initial_position
    assert position.kind.value == kind and position.timestamp == timestamp


@pytest.mark.parametrize("value", ["AT_SEQUENCE_NUMBER 123", "AT_TIMESTAMP", "AT_TIMESTAMP yesterday", "NOW"])
def test_a_bad_awslabs_starting_position_names_the_option_and_the_forms(value: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(**{"kinesis.startingPosition": value})
    message = str(failed.value)
    assert "'kinesis.startingPosition'" in message and "initialPosition" in message


def test_a_bad_awslabs_consumer_type_names_the_accepted_values() -> None:
    with pytest.raises(ConfigurationError, match="'kinesis.consumerType' = 'efo'.*GetRecords.*SubscribeToShard"):
        _parse(**{"kinesis.consumerType": "efo"})


@pytest.mark.parametrize(
    ("text", "millis"),
    [("10s", 10_000), ("400ms", 400), ("2m", 120_000), ("1h", 3_600_000), ("1.5s", 1_500), ("10 seconds", 10_000),
     ("3 min", 180_000), ("0s", 0), ("1d", 86_400_000), ("250MS", 250)],
)
def test_duration_strings_convert_to_milliseconds(text: str, millis: int) -> None:
    assert aliases.duration_ms(text, "maxFetchDuration") == millis


@pytest.mark.parametrize("text", ["10", "ten s", "-1s", "0.5ms", "10sx", "", "1e3s", "s"])
def test_a_bad_duration_names_the_option_and_the_format(text: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        aliases.duration_ms(text, "maxFetchDuration")
    message = str(failed.value)
    assert "'maxFetchDuration'" in message and repr(text) in message and "10s" in message


@pytest.mark.parametrize(
    ("options", "ours", "alias"),
    [
        ({"endpoint": "kinesis.us-east-1.amazonaws.com"}, "endpointUrl", "endpoint"),
        ({"kinesis.consumerName": "billing"}, "consumerName", "kinesis.consumerName"),
        ({"kinesis.getRecords.numberOfRecordsPerFetch": "20000"}, "maxRecordsPerFetch",
         "kinesis.getRecords.numberOfRecordsPerFetch"),
    ],
)
def test_an_error_about_an_aliased_option_names_the_alias_given(
    options: dict[str, str], ours: str, alias: str
) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(False, **options)
    message = str(failed.value)
    assert f"'{ours}'" in message and f"given as option '{alias}'" in message


def test_an_alias_out_of_our_range_says_which_name_was_given() -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(maxFetchDuration="2h")
    message = str(failed.value)
    assert "'maxFetchDurationMs' = 7200000 is out of range" in message and "'maxFetchDuration'" in message


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"maxFetchDuration": "10s", "maxFetchDurationMs": "5000"}, ("maxFetchDuration", "maxFetchDurationMs")),
        ({"minFetchPeriod": "1s", "fetchIntervalMs": "200"}, ("minFetchPeriod", "fetchIntervalMs")),
        ({"endpoint": "http://a:1", "endpointUrl": "http://b:2"}, ("endpoint", "endpointUrl")),
        ({"kinesis.region": "eu-west-1"}, ("kinesis.region", "region")),
        ({"kinesis.kinesisRegion": "eu-west-1"}, ("kinesis.kinesisRegion", "region")),
        ({"kinesis.startingPosition": "LATEST", "initialPosition": "trim_horizon"},
         ("kinesis.startingPosition", "initialPosition")),
        ({"kinesis.maxFetchTimePerShardSec": "30", "maxFetchDuration": "10s"},
         ("kinesis.maxFetchTimePerShardSec", "maxFetchDuration")),
        ({"kinesis.consumerType": "SubscribeToShard", "consumerMode": "polling"}, ("kinesis.consumerType", "consumerMode")),
    ],
)
def test_an_alias_and_our_name_with_different_values_fail_naming_both(
    options: dict[str, str], names: tuple[str, str]
) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(**options)
    message = str(failed.value)
    assert all(f"'{name}'" in message for name in names) and "disagree" in message


@pytest.mark.parametrize(
    "options",
    [
        {"maxFetchDuration": "10s", "maxFetchDurationMs": "10000"},
        {"kinesis.region": "us-east-1"},
        {"kinesis.startingPosition": "latest", "initialPosition": "LATEST"},
        {"kinesis.consumerType": "SubscribeToShard", "consumerMode": "EFO"},
        {"kinesis.failOnDataLoss": "TRUE", "failOnDataLoss": "true"},
        {"kinesis.startingPosition": "AT_TIMESTAMP 2023-08-30T19:00:05Z", "initialPosition": "at_timestamp",
         "startingTimestamp": "2023-08-30T21:00:05+02:00"},
    ],
)
def test_an_alias_and_our_name_with_the_same_value_agree(options: dict[str, str]) -> None:
    _parse(**options)


@pytest.mark.parametrize(
    ("option", "advice"),
    [
        ("maxFetchRate", "fetchIntervalMs"),
        ("fetchBufferSize", "maxRecordsPerTrigger"),
        ("shardFetchInterval", "every 30 s"),
        ("maxShardsPerDescribe", "not configurable"),
        ("coalesceThresholdBlockSize", "shardsPerTask"),
        ("coalesceBinSize", "shardsPerTask"),
        ("maxPartitions", "shardsPerTask"),
        ("consumerNamePrefix", "consumerName"),
        ("consumerRefreshInterval", "not configurable"),
        ("registeredConsumerId", "consumerName"),
        ("registeredConsumerIdType", "consumerName"),
        ("kinesis.describeShardInterval", "every 30 s"),
        ("kinesis.minBatchesToRetain", "spark.sql.streaming.minBatchesToRetain"),
        ("kinesis.checkNewRecordThreads", "idlePollIntervalMs"),
        ("kinesis.metadataCommitterType", "leaseTableName"),
        ("kinesis.metadataPath", "leaseTableName"),
        ("kinesis.dynamodb.tableName", "leaseTableName"),
        ("kinesis.clientNumRetries", "backoff"),
        ("kinesis.metadataMaxRetryIntervalMs", "backoff"),
        ("kinesis.subscribeToShard.timeoutSec", "not configurable"),
        ("proxyAddress", "HTTPS_PROXY"),
        ("kinesis.sink.aggregationEnabled", "no sink"),
        ("kinesis.internal.avoidEmptyBatches", "docs/migration.md"),
        ("kinesis.somethingNew", "docs/migration.md"),
    ],
)
def test_a_name_whose_meaning_differs_fails_naming_what_to_use(option: str, advice: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(**{option: "canary-value-42"})
    message = str(failed.value)
    assert f"'{option}'" in message and advice in message
    assert "canary-value-42" not in message


@pytest.mark.parametrize(
    "option",
    ["awsAccessKey", "awsSecretKey", "serviceCredential", "kinesis.awsAccessKeyId", "kinesis.awsSecretKey",
     "kinesis.sessionToken", "kinesis.credentialProviderClass", "proxyPassword"],
)
def test_credential_options_of_other_connectors_are_refused_without_echoing_them(option: str) -> None:
    secret = "wJalrXUtnFEMI-canary-K7MDENG"
    with pytest.raises(ConfigurationError) as failed:
        _parse(**{option: secret})
    message = str(failed.value)
    assert f"'{option}'" in message and "botocore" in message and secret not in message


def test_every_refused_name_given_at_once_is_listed_in_one_error() -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(maxFetchRate="2.0", fetchBufferSize="1gb")
    assert "'maxFetchRate'" in str(failed.value) and "'fetchBufferSize'" in str(failed.value)


ROLE = "arn:aws:iam::123456789012:role/reader"


def test_role_options_reach_the_settings_as_names() -> None:
    """Databricks' names are ours; the awslabs kinesis.sts* names are aliases of them."""
    ours = _parse(roleArn=ROLE, roleSessionName="etl-job", roleExternalId="ext-1", stsEndpoint="https://sts.example",
                  profile="analytics")
    theirs = _parse(**{"kinesis.stsRoleArn": ROLE, "kinesis.stsSessionName": "etl-job", "roleExternalId": "ext-1",
                       "kinesis.stsEndpointUrl": "https://sts.example", "profile": "analytics"})
    for parsed in (ours, theirs):
        assert parsed.aws_settings().credentials == CredentialSource(
            profile="analytics", role_arn=ROLE, role_session_name="etl-job", role_external_id="ext-1",
            sts_endpoint_url="https://sts.example")


@pytest.mark.parametrize(("options", "message"), [
    ({"roleExternalId": "ext-1"}, "only apply with roleArn"),
    ({"kinesis.stsSessionName": "etl"}, "only apply with roleArn"),
    ({"roleArn": "reader"}, "not an IAM role ARN"),
    ({"roleArn": ROLE, "stsEndpoint": "sts.amazonaws.com"}, "stsEndpoint"),
])
def test_role_options_that_cannot_work_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _parse(**options)


ARN_A = "arn:aws:kinesis:eu-west-1:111122223333:stream/orders"
ARN_B = "arn:aws:kinesis:eu-west-1:444455556666:stream/payments"


def _streams(**options: str):
    return parse_options({"region": "eu-west-1", **options}, batch=None, environ={})


def test_stream_name_takes_a_comma_separated_list_in_order() -> None:
    parsed = _streams(streamName="orders,payments, refunds")
    assert parsed.stream_names == ("orders", "payments", "refunds")
    assert all(ref.arn is None for ref in parsed.streams)
    assert parsed.application_name == "kinesis-src-orders"  # the first stream's: adding streams keeps it


def test_stream_arn_names_streams_of_other_accounts_by_arn() -> None:
    parsed = parse_options({"streamARN": f"{ARN_A},{ARN_B}"}, batch=None, environ={})
    assert parsed.stream_names == ("orders", "payments")
    assert [ref.api_args() for ref in parsed.streams] == [{"StreamARN": ARN_A}, {"StreamARN": ARN_B}]
    assert [ref.account for ref in parsed.streams] == ["111122223333", "444455556666"]
    assert parsed.region == "eu-west-1"  # from the ARNs


@pytest.mark.parametrize(("options", "names"), [
    ({"streamName": "orders,payments,orders"}, ("'streamName'", "'orders' twice")),
    ({"streamARN": f"{ARN_A},{ARN_A.replace('111122223333', '999999999999')}"}, ("'streamARN'", "'orders' twice")),
    ({"streamName": "orders,,payments"}, ("'streamName'", "empty item")),
    ({"streamName": "orders,"}, ("'streamName'", "empty item")),
    ({"streamName": "orders,pay ments"}, ("'streamName'", "'pay ments'")),
    ({"streamName": "orders", "streamARN": ARN_A}, ("'streamName'", "'streamARN'", "not both")),
    ({"streamARN": "orders"}, ("'streamARN'", "not a Kinesis stream ARN", "arn:aws:kinesis:")),
    ({"streamARN": "arn:aws:sqs:eu-west-1:111122223333:orders"}, ("'streamARN'", "not a Kinesis stream ARN")),
    ({"streamARN": ARN_A, "region": "us-east-1"}, ("'streamARN'", "'region'", "eu-west-1")),
    ({"streamARN": f"{ARN_A},{ARN_B.replace('eu-west-1', 'us-east-1')}"}, ("'streamARN'", "one region")),
    ({"region": "eu-west-1"}, ("'streamName'", "required")),
])
def test_bad_stream_lists_fail_naming_the_option(options: dict, names: tuple[str, ...]) -> None:
    with pytest.raises(ConfigurationError) as failed:
        parse_options(options, batch=None, environ={})
    assert all(name in str(failed.value) for name in names), str(failed.value)


def test_stream_arn_is_no_longer_refused_as_planned() -> None:
    assert "streamarn" not in aliases.PLANNED and "streamARN" in KNOWN_OPTIONS


@pytest.mark.parametrize(("text", "start", "end"), [
    ("0-99", 0, 99),
    ("0/2", 0, 2**127 - 1),
    ("1/2", 2**127, 2**128 - 1),
    (f"5-{2**128 - 1}", 5, 2**128 - 1),
])
def test_hash_key_range_parses_bounds_or_a_slice(text: str, start: int, end: int) -> None:
    key_range = _parse(hashKeyRange=text).key_range
    assert key_range is not None and (key_range.start, key_range.end) == (start, end)
    assert _parse().key_range is None


@pytest.mark.parametrize("text", ["2/2", "3/2", "0/0", "9-3", f"0-{2**128}", "1/2/3", "a-b", "-5-7", "0x0-0xff"])
def test_a_bad_hash_key_range_fails_at_parsing_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        _parse(hashKeyRange=text)
    assert "'hashKeyRange'" in str(failed.value), str(failed.value)


def test_databricks_json_timestamp_position_points_at_starting_timestamp() -> None:
    text = '{"at_timestamp": "06/25/2020 10:23:45 PDT", "format": "MM/dd/yyyy HH:mm:ss ZZZ"}'
    with pytest.raises(ConfigurationError) as failed:
        _parse(initialPosition=text)
    message = str(failed.value)
    assert "'initialPosition'" in message and "startingTimestamp" in message and "at_timestamp" in message


def test_unknown_options_point_at_the_migration_guide() -> None:
    with pytest.raises(ConfigurationError, match="docs/migration.md"):
        _parse(maxRecordsPerShards="5")


def _migration_names() -> set[str]:
    """Backticked first-column names of the tables under '## Databricks' and '## awslabs' in docs/migration.md."""
    names: set[str] = set()
    section = ""
    for line in MIGRATION.read_text().splitlines():
        if line.startswith("## "):
            section = line
        elif line.startswith("| `") and ("Databricks" in section or "awslabs" in section):
            names.add(line.split("|")[1].strip().strip("`"))
    return names


def test_the_migration_guide_lists_every_name_the_parser_knows_of_and_no_other() -> None:
    documented = {name.lower() for name in _migration_names()}
    handled = set(aliases.ALIASES) | set(aliases.REFUSED) | set(aliases.PLANNED)
    assert handled - documented == set(), "add these names to docs/migration.md"
    ours = {name.lower() for name in KNOWN_OPTIONS}
    assert documented - handled - ours == set(), "docs/migration.md lists names the parser does not handle"
