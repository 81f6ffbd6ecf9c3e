"""Profiles and assumed roles (kinesis_src.aws.credentials) on moto's server with IAM enforced.

The reader's own user may only assume the role; the role may read Kinesis.
So a read that works proves the role was assumed, and one that fails
without the role proves the user alone could not.
"""

from __future__ import annotations

import os
import pickle

import aiobotocore.client
import boto3
import botocore.client
import pytest
from moto_iam import (  # tests/moto_iam.py; fixtures via conftest.py
    MOTO_ONLY,
    grant,
    iam_statements,
    role,
)

from kinesis_src import AwsSettings, read_table
from kinesis_src.aws import KinesisClient, credentials
from kinesis_src.config import CredentialSource
from kinesis_src.errors import AccessDeniedError, ConfigurationError

READ = iam_statements()["kinesis-read"]  # docs/iam.md's statement, as the IAM tests use it


def stream(url: str) -> None:
    kinesis = boto3.client("kinesis", endpoint_url=url)
    kinesis.create_stream(StreamName="s", ShardCount=2)
    kinesis.put_records(StreamName="s", Records=[{"PartitionKey": f"k{i}", "Data": b"x"} for i in range(10)])


def read(url: str, source: CredentialSource) -> int:
    settings = AwsSettings(region="us-east-1", endpoint_url=url, credentials=source)
    return read_table("s", kinesis=KinesisClient(settings), progress=False).num_rows


@pytest.fixture
def assume_role_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every AssumeRole request any botocore or aiobotocore client makes (the refresh is their own)."""
    calls: list[dict] = []
    original = botocore.client.BaseClient._make_api_call
    aoriginal = aiobotocore.client.AioBaseClient._make_api_call

    def spy(self, operation, params):
        if operation == "AssumeRole":
            calls.append(params)
        return original(self, operation, params)

    async def aspy(self, operation, params):
        if operation == "AssumeRole":
            calls.append(params)
        return await aoriginal(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", spy)
    monkeypatch.setattr(aiobotocore.client.AioBaseClient, "_make_api_call", aspy)
    return calls


def test_a_role_is_assumed_once_and_reads_what_the_user_alone_may_not(
    iam_moto: str, monkeypatch: pytest.MonkeyPatch, assume_role_calls: list[dict]
) -> None:
    stream(iam_moto)
    arn = role(iam_moto, "kinesis-reader", READ)
    grant(iam_moto, ["sts:AssumeRole"], monkeypatch)
    with pytest.raises(AccessDeniedError, match="kinesis:"):
        read(iam_moto, CredentialSource())
    source = CredentialSource(role_arn=arn, role_session_name="etl-job", role_external_id="ext-1", sts_endpoint_url=iam_moto)
    assert read(iam_moto, source) == 10 and read(iam_moto, source) == 10
    assert len(assume_role_calls) == 1  # one per process: both reads' clients share its session; none per request
    assert assume_role_calls[0] == {"RoleArn": arn, "RoleSessionName": "etl-job", "DurationSeconds": 3600,
                                    "ExternalId": "ext-1"}


def test_credentials_close_to_expiry_are_renewed_before_a_request(
    iam_moto: str, monkeypatch: pytest.MonkeyPatch, assume_role_calls: list[dict]
) -> None:
    """A 15-minute role is inside botocore's refresh window from the start: every request renews it."""
    stream(iam_moto)
    arn = role(iam_moto, "kinesis-reader", READ)
    grant(iam_moto, ["sts:AssumeRole"], monkeypatch)
    monkeypatch.setattr(credentials, "ROLE_DURATION_S", 900)
    assert read(iam_moto, CredentialSource(role_arn=arn, sts_endpoint_url=iam_moto)) == 10
    assert len(assume_role_calls) >= 3 and all(c["RoleSessionName"] == "kinesis-src" for c in assume_role_calls)


def test_a_role_that_may_not_be_assumed_names_sts_assume_role(iam_moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stream(iam_moto)
    arn = role(iam_moto, "kinesis-reader", READ)
    grant(iam_moto, ["kinesis:ListShards"], monkeypatch)  # anything but sts:AssumeRole
    with pytest.raises(AccessDeniedError, match="sts:AssumeRole"):
        read(iam_moto, CredentialSource(role_arn=arn, sts_endpoint_url=iam_moto))


def test_a_profile_selects_the_shared_config_section(iam_moto: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    stream(iam_moto)
    grant(iam_moto, READ, monkeypatch)
    config = tmp_path / "config"
    config.write_text(f"[profile reader]\naws_access_key_id = {os.environ['AWS_ACCESS_KEY_ID']}\n"
                      f"aws_secret_access_key = {os.environ['AWS_SECRET_ACCESS_KEY']}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-the-reader")  # the profile must win over the environment
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-reader")
    with pytest.raises(AccessDeniedError):
        read(iam_moto, CredentialSource())
    assert read(iam_moto, CredentialSource(profile="reader")) == 10
    with pytest.raises(ConfigurationError, match="profile 'nope' is not in the shared config"):
        read(iam_moto, CredentialSource(profile="nope"))


@pytest.mark.parametrize("kwargs, message", [
    ({"role_arn": "arn:aws:iam::123:role/r"}, "not an IAM role ARN"),
    ({"role_arn": "my-role"}, "not an IAM role ARN"),
    ({"role_session_name": "etl"}, "only apply with roleArn"),
    ({"role_arn": "arn:aws:iam::123456789012:role/r", "role_session_name": "a b"}, "roleSessionName"),
    ({"role_arn": "arn:aws:iam::123456789012:role/r", "sts_endpoint_url": "http://u:p@sts"}, "must not contain"),
])
def test_bad_credential_settings_are_refused_before_any_call(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CredentialSource(**kwargs)


def test_settings_carry_names_only_and_pickle_without_any_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "CANARY-KEY-7f3a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "CANARY-SECRET-7f3a")
    source = CredentialSource(role_arn="arn:aws:iam::123456789012:role/r", role_external_id="ext")
    settings = AwsSettings(region="us-east-1", credentials=source)
    KinesisClient(settings)  # a client exists; the settings still hold no credentials
    text = pickle.dumps(settings)
    assert b"CANARY" not in text and pickle.loads(text) == settings and b"arn:aws:iam::123456789012:role/r" in text


def test_the_consumer_assumes_the_role_for_kinesis_and_its_lease_table(
    iam_moto: str, monkeypatch: pytest.MonkeyPatch, assume_role_calls: list[dict]
) -> None:
    """The async Kinesis client (aiobotocore) and the lease table's (botocore) both go through the role."""
    import asyncio

    from kinesis_src import Consumer, LeaseTiming

    stream(iam_moto)
    arn = role(iam_moto, "consumer", READ + iam_statements()["lease-table"] + MOTO_ONLY)
    grant(iam_moto, ["sts:AssumeRole"], monkeypatch)

    async def consume() -> int:
        seen = 0
        async with Consumer("s", application_name="roles", endpoint_url=iam_moto, region="us-east-1",
                            credentials=CredentialSource(role_arn=arn, sts_endpoint_url=iam_moto),
                            idle_interval_s=0.2, handle_signals=False,
                            lease_timing=LeaseTiming(failover_s=3, renew_interval_s=1, scan_interval_s=0.2)) as consumer:
            async for batch in consumer:
                seen += len(batch.records)
                await batch.checkpoint()
                if seen >= 10:
                    return seen
        return seen

    assert asyncio.run(asyncio.wait_for(consume(), 60)) == 10
    assert assume_role_calls  # the Consumer's clients (Kinesis, the lease table) assumed it
