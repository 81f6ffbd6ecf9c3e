"""Server-side failure codes are retried whatever HTTP status carries them (a real HTTP answer, not a stub)."""

from __future__ import annotations

from typing import Iterator

import pytest
from scripted_endpoint import SHARD, ScriptedEndpoint, records

from kinesis_src.aws import KinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import RetriesExhaustedError, ServiceUnavailableError
from kinesis_src.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)


@pytest.fixture
def endpoints(dummy_credentials: None) -> Iterator[list[ScriptedEndpoint]]:
    made: list[ScriptedEndpoint] = []
    yield made
    for endpoint in made:
        endpoint.close()


def _client(endpoints: list[ScriptedEndpoint], **script: list[str]) -> tuple[ScriptedEndpoint, KinesisClient]:
    endpoint = ScriptedEndpoint(records(3), script)
    endpoints.append(endpoint)
    return endpoint, KinesisClient(AwsSettings(region="us-east-1", endpoint_url=endpoint.url, retry=FAST))


@pytest.mark.parametrize("code", ["InternalFailureException", "InternalFailure", "ServiceUnavailable"])
@pytest.mark.parametrize("status", [400, 500])
def test_a_server_failure_code_is_retried(endpoints: list[ScriptedEndpoint], code: str, status: int) -> None:
    endpoint, kinesis = _client(endpoints, ListShards=[f"error:{code}:{status}"] * 2)
    assert kinesis.list_shards("orders")[0]["ShardId"] == SHARD
    assert endpoint.requests["ListShards"] == 3


def test_a_persistent_internal_failure_gives_up_naming_the_call(endpoints: list[ScriptedEndpoint]) -> None:
    _, kinesis = _client(endpoints, ListShards=["error:InternalFailureException:400"] * FAST.max_attempts)
    with pytest.raises(RetriesExhaustedError) as info:
        kinesis.list_shards("orders")
    assert isinstance(info.value.last_error, ServiceUnavailableError)
    assert "ListShards" in str(info.value) and "InternalFailureException" in str(info.value.last_error)
