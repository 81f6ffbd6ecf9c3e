"""kinesis-src: read Kinesis Data Streams correctly through splits and merges.

The public surface (docs/api.md), loaded on first use: ``import kinesis_src`` never loads pyspark.
"""


from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs; at run time see _EXPORTS
    from lineage import KeyRange

    from .config import AwsSettings
    from .consumer import BlockingConsumer, Consumer
    from .consumer.batch import Batch
    from .consumer.consumer_config import ConsumerConfig
    from .consumer.processing import Reject, Release
    from .drain import drain_stream
    from .errors import KinesisSourceError
    from .leases.coordinator import LeaseTiming
    from .positions import Position
    from .records import Record
    from .retry import RetryPolicy
    from .spark import KinesisDataSource
    from .window import read_table

_EXPORTS: dict[str, str] = {
    "AwsSettings": "kinesis_src.config",
    "Batch": "kinesis_src.consumer.batch",
    "BlockingConsumer": "kinesis_src.consumer",
    "Consumer": "kinesis_src.consumer",
    "ConsumerConfig": "kinesis_src.consumer.consumer_config",
    "KeyRange": "lineage",
    "KinesisDataSource": "kinesis_src.spark",
    "KinesisSourceError": "kinesis_src.errors",
    "LeaseTiming": "kinesis_src.leases.coordinator",
    "Position": "kinesis_src.positions",
    "Record": "kinesis_src.records",
    "Reject": "kinesis_src.consumer.processing",
    "Release": "kinesis_src.consumer.processing",
    "RetryPolicy": "kinesis_src.retry",
    "drain_stream": "kinesis_src.drain",
    "read_table": "kinesis_src.window",
}
"""Public name -> the module that defines it (``KinesisDataSource`` needs pyspark)."""

__all__ = [
    "AwsSettings",
    "Batch",
    "BlockingConsumer",
    "Consumer",
    "ConsumerConfig",
    "KeyRange",
    "KinesisDataSource",
    "KinesisSourceError",
    "LeaseTiming",
    "Position",
    "Record",
    "Reject",
    "Release",
    "RetryPolicy",
    "drain_stream",
    "read_table",
]
__version__ = "0.1.0"

_SUB_PACKAGE_NAMES: dict[str, str] = {
    "KinesisClient": "kinesis_src.aws",
    "ConsumerMetrics": "kinesis_src.consumer",
    "ProcessingMetrics": "kinesis_src.consumer.processing",
    "DeadLetter": "kinesis_src.consumer.processing",
    "DeliveredRecord": "kinesis_src.consumer.processing",
    "CredentialSource": "kinesis_src.config",
}
"""Internal names a user may look for here -> the documented sub-package that offers them (docs/api.md)."""


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and keep the value, so the next lookup is plain."""
    module = _EXPORTS.get(name)
    if module is None:
        home = _SUB_PACKAGE_NAMES.get(name)
        hint = f": import it from {home} (`from {home} import {name}`)" if home else ""
        raise AttributeError(f"module 'kinesis_src' has no attribute {name!r}{hint}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
