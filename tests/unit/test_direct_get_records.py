"""GetRecords sent directly (kinesis_src.aws.direct_get_records) answers what aiobotocore's path answers.

The scripted endpoint (tests/scripted_endpoint.py) plays Kinesis: the same pages, the same errors
(translated and retried the same way), the request signed for the client's endpoint and credentials.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Iterator

import botocore.handlers
import pytest
from scripted_endpoint import SHARD, ScriptedEndpoint, records

from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.aws.direct_get_records import wanted
from kinesis_src.config import AwsSettings
from kinesis_src.errors import (
    ConfigurationError,
    IteratorExpiredError,
    MalformedResponseError,
    RetriesExhaustedError,
    StreamNotFoundError,
    TruncatedResponseError,
)
from kinesis_src.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
SERVED = records(3)
ERRORS = {
    "expired": "error:com.amazonaws.kinesis.v20131202#ExpiredIteratorException:400",
    "throttled": "error:ProvisionedThroughputExceededException:400",
    "missing": "error:ResourceNotFoundException:400",
}


@pytest.fixture
def scripted(dummy_credentials: None) -> Iterator[Any]:
    servers: list[ScriptedEndpoint] = []

    def start(**script: list[str]) -> tuple[ScriptedEndpoint, AwsSettings]:
        server = ScriptedEndpoint(SERVED, {op: [ERRORS.get(a, a) for a in actions] for op, actions in script.items()})
        servers.append(server)
        return server, AwsSettings(region="us-east-1", endpoint_url=server.url, retry=FAST)

    yield start
    for server in servers:
        server.close()


def get_records(settings: AwsSettings) -> Any:
    async def run() -> Any:
        async with AsyncKinesisClient(settings) as kinesis:
            return await kinesis.get_records("it-1", 100, SHARD, "orders")

    return asyncio.run(run())


def user_agents(server: ScriptedEndpoint) -> list[str]:
    return [seen.get("user-agent", "") for seen in server.seen if seen["operation"] == "GetRecords"]


@pytest.mark.parametrize("direct", [True, False])
def test_both_paths_give_the_same_page(scripted, direct: bool) -> None:
    server, settings = scripted()
    page = get_records(replace(settings, direct_get_records=direct))
    assert page.sequence_numbers == [r.sequence_number for r in SERVED]
    assert [bytes(d) for d in page.data] == [r.data for r in SERVED]
    assert page.next_iterator == "it-2" and page.millis_behind_latest == 7
    assert ("direct GetRecords" in user_agents(server)[0]) is direct


def test_the_request_is_signed_for_the_credentials_and_region(scripted, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-1")
    server, settings = scripted()
    get_records(replace(settings, region="eu-west-1"))
    seen = server.seen[-1]
    assert seen["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/eu-west-1/kinesis/aws4_request" in seen["authorization"]
    assert seen["x-amz-security-token"] == "session-token-1"
    assert seen["host"] == server.url.split("//")[1]


@pytest.mark.parametrize(("action", "error"), [("expired", IteratorExpiredError), ("garbage", MalformedResponseError)])
def test_an_answer_that_retrying_cannot_fix_is_raised_at_once(scripted, action: str, error: type) -> None:
    server, settings = scripted(GetRecords=[action])
    with pytest.raises(error) as info:
        get_records(settings)
    assert "GetRecords on shard shardId-000000000000 of stream 'orders'" in str(info.value)
    assert len(user_agents(server)) == 1 and "direct" in user_agents(server)[0]


@pytest.mark.parametrize("action", ["throttled", "truncate"])
def test_a_throttle_or_a_cut_body_is_retried(scripted, action: str) -> None:
    server, settings = scripted(GetRecords=[action, action])
    assert get_records(settings).next_iterator == "it-2"
    assert len(user_agents(server)) == 3


def test_a_body_cut_every_time_gives_up_naming_the_content_length(scripted) -> None:
    _, settings = scripted(GetRecords=["truncate"] * FAST.max_attempts)
    with pytest.raises(RetriesExhaustedError) as info:
        get_records(settings)
    assert isinstance(info.value.last_error, TruncatedResponseError)
    assert "Content-Length" in str(info.value.last_error)


def test_a_missing_stream_is_named_as_on_aiobotocores_path(scripted) -> None:
    server, settings = scripted(GetRecords=["missing"], DescribeStreamSummary=["missing"])
    with pytest.raises(StreamNotFoundError, match="orders"):
        get_records(settings)
    assert [s["operation"] for s in server.seen] == ["GetRecords", "DescribeStreamSummary"]


def test_an_unreachable_endpoint_is_named(dummy_credentials: None) -> None:
    settings = AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:1", retry=FAST)
    with pytest.raises(RetriesExhaustedError) as info:
        get_records(settings)
    assert "http://127.0.0.1:1" in str(info.value.last_error)


def test_an_active_request_interceptor_keeps_get_records_on_botocore(monkeypatch) -> None:
    class Interceptor:
        enabled = True

        def __call__(self, **_: Any) -> None:
            return None

    settings, url = AwsSettings(region="us-east-1"), "https://kinesis.us-east-1.amazonaws.com"
    assert wanted(settings, url)
    interceptor = Interceptor()
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", [*botocore.handlers.BUILTIN_HANDLERS,
                                                                ("before-send", interceptor)])
    assert not wanted(settings, url)
    interceptor.enabled = False
    assert wanted(settings, url)
    assert not wanted(replace(settings, direct_get_records=False), url)


def test_an_endpoint_with_a_path_keeps_get_records_on_botocore(scripted) -> None:
    """botocore posts to the endpoint's path; this signer signs ``/`` only."""
    server, settings = scripted()
    assert wanted(settings, server.url + "/") and not wanted(settings, server.url + "/kinesis")
    page = get_records(replace(settings, endpoint_url=server.url + "/kinesis"))
    assert page.next_iterator == "it-2" and "direct" not in user_agents(server)[-1]
    assert server.seen[-1]["path"].startswith("/kinesis")


def test_the_environment_proxy_is_used_unless_no_proxy_exempts_the_host(scripted, monkeypatch) -> None:
    """The scripted server doubles as an HTTP proxy: a proxied request names the endpoint in full."""
    proxy, _ = scripted()
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    target = AwsSettings(region="us-east-1", endpoint_url="http://kinesis.invalid:4567", retry=FAST)
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert get_records(target).next_iterator == "it-2"
    assert proxy.seen[-1]["host"] == "kinesis.invalid:4567"
    monkeypatch.setenv("NO_PROXY", "kinesis.invalid")
    with pytest.raises(RetriesExhaustedError):
        get_records(target)


@pytest.mark.parametrize(("value", "direct"), [("0", False), ("false", False), ("1", True), (None, True)])
def test_the_environment_can_send_get_records_through_aiobotocore(value: str | None, direct: bool) -> None:
    environ = {"AWS_REGION": "us-east-1"} | ({} if value is None else {"KINESIS_SRC_DIRECT_GET_RECORDS": value})
    assert AwsSettings.from_env(environ=environ).direct_get_records is direct
    assert AwsSettings.from_env(environ=environ, direct_get_records=True).direct_get_records is True


def test_an_unknown_value_of_the_environment_switch_is_refused_naming_it() -> None:
    environ = {"AWS_REGION": "us-east-1", "KINESIS_SRC_DIRECT_GET_RECORDS": "flase"}
    with pytest.raises(ConfigurationError, match="KINESIS_SRC_DIRECT_GET_RECORDS='flase'"):
        AwsSettings.from_env(environ=environ)
