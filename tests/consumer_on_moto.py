"""A real Consumer on moto's DynamoDB with the fake Kinesis as both its clients.

Shared by the unit tests that start a whole Consumer (lease table, claims, units) without servers:
:func:`wire_fake` points the Consumer's sync and async Kinesis clients at one ``FakeKinesis``.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_kinesis import FakeKinesis

import kinesis_src.consumer.consumer as consumer_module
import kinesis_src.consumer.stream_reader as stream_reader_module
import kinesis_src.consumer.unit_readers as unit_readers_module


class FakeAsyncClient:
    """Stands in for AsyncKinesisClient(settings, ...): entering it gives the fake's async twin."""

    def __init__(self, fake: FakeKinesis) -> None:
        self.fake = fake

    def __call__(self, *args: Any, **kwargs: Any) -> FakeAsyncClient:
        return self

    async def __aenter__(self) -> Any:
        return await self.fake.aio().__aenter__()


def wire_fake(monkeypatch: pytest.MonkeyPatch, fake: FakeKinesis) -> None:
    """Every Kinesis client the Consumer makes, sync or async, is ``fake``."""
    for module in (stream_reader_module, unit_readers_module):
        monkeypatch.setattr(module, "KinesisClient", lambda *_, **__: fake, raising=False)
    monkeypatch.setattr(consumer_module, "AsyncKinesisClient", FakeAsyncClient(fake))
