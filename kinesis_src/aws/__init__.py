"""The AWS boundary: the only package that imports botocore."""

from .boundary import call, client_config, new_session, translate
from .async_fanout import AsyncFanOut
from .fanout import ConsumerDescription, FanOut, FanOutEvent
from .dynamodb import DynamoDBClient, TableDescription, TransactOutcome, WriteResult
from .kinesis import KinesisClient, StreamSummary

__all__ = [
    "AsyncFanOut",
    "ConsumerDescription",
    "FanOut",
    "FanOutEvent",
    "DynamoDBClient",
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
