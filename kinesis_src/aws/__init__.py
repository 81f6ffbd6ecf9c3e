"""The AWS boundary: the only package that imports botocore.

Names resolve on first use (PEP 562): sync paths never import aiobotocore (test_imports.py)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .async_fanout import AsyncFanOut
    from .boundary import call, client_config, new_session, translate
    from .dynamodb import DynamoDBClient, TableDescription, TransactOutcome, WriteResult
    from .fanout import ConsumerDescription, FanOut, FanOutEvent
    from .kinesis import KinesisClient, StreamSummary

_EXPORTS: dict[str, str] = {
    "AsyncFanOut": ".async_fanout",
    "ConsumerDescription": ".fanout",
    "FanOut": ".fanout",
    "FanOutEvent": ".fanout",
    "DynamoDBClient": ".dynamodb",
    "KinesisClient": ".kinesis",
    "StreamSummary": ".kinesis",
    "TableDescription": ".dynamodb",
    "TransactOutcome": ".dynamodb",
    "WriteResult": ".dynamodb",
    "call": ".boundary",
    "client_config": ".boundary",
    "new_session": ".boundary",
    "translate": ".boundary",
}

__all__ = [
    "AsyncFanOut",
    "ConsumerDescription",
    "DynamoDBClient",
    "FanOut",
    "FanOutEvent",
    "KinesisClient",
    "StreamSummary",
    "TableDescription",
    "TransactOutcome",
    "WriteResult",
    "call",
    "client_config",
    "new_session",
    "translate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kinesis_src.aws' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
