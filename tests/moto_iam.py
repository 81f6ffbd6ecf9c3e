"""moto's server in a thread with IAM enforcement, for tests of what credentials may do.

moto enforces IAM for Kinesis, DynamoDB and STS once ``INITIAL_NO_AUTH_ACTION_COUNT``
requests were served; set-up runs with it off, :func:`grant` turns it on.
The server binds loopback; aiobotocore reaches it as well as botocore does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import boto3
import pytest
import requests

IAM_DOC = Path(__file__).resolve().parents[1] / "docs" / "iam.md"
MOTO_ONLY = ["dynamodb:TransactWriteItems"]  # DynamoDB authorizes a transaction by its parts; moto by its name


def iam_statements() -> dict[str, list[str]]:
    """Each ``<!-- statement: name -->`` JSON block's actions in docs/iam.md."""
    found = re.findall(r"<!-- statement: ([a-z-]+) -->\s*```json\n(.*?)```", IAM_DOC.read_text(), re.DOTALL)
    return {name: list(json.loads(body)["Action"]) for name, body in found}


@pytest.fixture(scope="module")
def moto_iam_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def iam_moto(moto_iam_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh moto with auth off (for set-up); :func:`grant` turns it on for the code under test."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    for key, value in {"AWS_ACCESS_KEY_ID": "setup", "AWS_SECRET_ACCESS_KEY": "setup", "AWS_REGION": "us-east-1",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    requests.post(f"{moto_iam_server}/moto-api/reset", timeout=10)
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))  # restored after the test
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    yield moto_iam_server


def grant(url: str, actions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An IAM user allowed exactly ``actions``; its keys become the environment's; enforcement starts now."""
    from moto import settings

    iam = boto3.client("iam", endpoint_url=url)
    iam.create_user(UserName="reader")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName="reader", PolicyName="kinesis-src", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0


def role(url: str, name: str, actions: list[str]) -> str:
    """A role allowed exactly ``actions``, which any principal whose own policy allows sts:AssumeRole may assume;
    its ARN. (moto matches a trust policy's principal literally: an account root would not admit a user.)"""
    iam = boto3.client("iam", endpoint_url=url)
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_role_policy(RoleName=name, PolicyName="kinesis-src", PolicyDocument=json.dumps(policy))
    return arn
