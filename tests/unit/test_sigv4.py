"""Every signature of kinesis_src.aws.sigv4 equals botocore's SigV4Auth on the same request and clock."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.aws.sigv4 import JsonPostSigner, Keys

CONTENT_TYPE = "application/x-amz-json-1.1"


def botocore_headers(url: str, keys: Keys, region: str, target: str, body: bytes, now: dt.datetime) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body,
                         headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": target})
    with mock.patch("botocore.auth.get_current_datetime", return_value=now.replace(tzinfo=None)):
        SigV4Auth(Credentials(keys.access_key, keys.secret_key, keys.token), "kinesis", region).add_auth(request)
    return {k.lower(): v for k, v in request.headers.items()}


def ours(url: str, keys: Keys, region: str, target: str, body: bytes, now: dt.datetime) -> dict[str, str]:
    host = url.split("//", 1)[1].rstrip("/")
    return JsonPostSigner(host, region, "kinesis", CONTENT_TYPE).headers(keys, target, body, now)


NOW = dt.datetime(2026, 11, 27, 17, 20, 5, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEJr//////////wEaDCx+token/with=odd+chars"])
@pytest.mark.parametrize("url", ["https://kinesis.eu-west-1.amazonaws.com", "http://127.0.0.1:4567"])
def test_the_signature_is_botocores(url: str, token: str | None) -> None:
    keys = Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    body = b'{"ShardIterator": "AAAAAAAAAAH/x+y=", "Limit": 10000}'
    expected = botocore_headers(url, keys, "eu-west-1", "Kinesis_20131202.GetRecords", body, NOW)
    got = ours(url, keys, "eu-west-1", "Kinesis_20131202.GetRecords", body, NOW)
    assert got["authorization"] == expected["authorization"]
    assert got["x-amz-date"] == expected["x-amz-date"]
    assert got.get("x-amz-security-token") == expected.get("x-amz-security-token")


def test_a_new_day_or_secret_derives_a_new_key() -> None:
    signer = JsonPostSigner("kinesis.us-east-1.amazonaws.com", "us-east-1", "kinesis", CONTENT_TYPE)
    url = "https://kinesis.us-east-1.amazonaws.com"
    for keys, now in [(Keys("A", "s1"), NOW), (Keys("A", "s1"), NOW + dt.timedelta(days=1)),
                      (Keys("A", "s2"), NOW + dt.timedelta(days=1))]:
        got = signer.headers(keys, "T", b"{}", now)
        assert got["authorization"] == botocore_headers(url, keys, "us-east-1", "T", b"{}", now)["authorization"]


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=300),
    secret=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40),
    region=st.sampled_from(["us-east-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1"]),
    seconds=st.integers(min_value=0, max_value=10**9),
)
@example(body=b"", secret="/", region="us-east-1", seconds=0)
def test_any_body_secret_region_and_time_sign_as_botocore_does(body: bytes, secret: str, region: str,
                                                               seconds: int) -> None:
    now = dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=seconds)
    keys = Keys("AKID", secret)
    url = f"https://kinesis.{region}.amazonaws.com"
    assert ours(url, keys, region, "Kinesis_20131202.GetRecords", body, now)["authorization"] == \
        botocore_headers(url, keys, region, "Kinesis_20131202.GetRecords", body, now)["authorization"]
