"""AT_TIMESTAMP positions reach Kinesis with their milliseconds, on every botocore setup.cfg allows.

botocore before ~1.42 serializes a JSON-protocol timestamp as whole seconds unless
a client's serializer is created with millisecond precision; AT_TIMESTAMP would
then start up to a second early. Our sessions ask for milliseconds
(:func:`kinesis_src.aws.boundary.millisecond_timestamps`); `make oldest` runs this
file on botocore 1.40.46. The request is captured at ``before-send`` and never sent.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.positions import Position

AT = datetime(2026, 11, 27, 12, 0, 0, 123_000, tzinfo=UTC)
SETTINGS = AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:9")


class Captured(Exception):
    def __init__(self, body: bytes) -> None:
        super().__init__("captured")
        self.body = body


def capture(request: Any, **_: Any) -> None:
    raise Captured(request.body)


def sent_timestamp(body: bytes) -> float:
    return float(json.loads(body)["Timestamp"])


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")


def test_the_sync_client_sends_milliseconds() -> None:
    kinesis = KinesisClient(SETTINGS)
    kinesis.botocore_client.meta.events.register("before-send.kinesis.GetShardIterator", capture)
    with pytest.raises(Exception) as info:
        kinesis.get_shard_iterator("orders", "shardId-000000000000", Position.at_timestamp(AT))
    captured = info.value if isinstance(info.value, Captured) else info.value.__cause__
    assert isinstance(captured, Captured), info.value
    assert sent_timestamp(captured.body) == pytest.approx(AT.timestamp(), abs=1e-6)


def test_the_async_client_sends_milliseconds() -> None:
    async def run() -> bytes:
        async with AsyncKinesisClient(SETTINGS) as kinesis:
            kinesis.botocore_client.meta.events.register("before-send.kinesis.GetShardIterator", capture)
            try:
                await kinesis.get_shard_iterator("orders", "shardId-000000000000", Position.at_timestamp(AT))
            except Exception as exc:  # noqa: BLE001  (the capture, maybe wrapped by the boundary)
                captured = exc if isinstance(exc, Captured) else exc.__cause__
                assert isinstance(captured, Captured), exc
                return captured.body
        raise AssertionError("the request was sent")

    assert sent_timestamp(asyncio.run(run())) == pytest.approx(AT.timestamp(), abs=1e-6)
