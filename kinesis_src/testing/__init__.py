"""A testing kit for pipelines that read Kinesis: endpoints, streams, resharding, a keyed-counter verifier.

Also a pytest plugin (``kinesis_src.testing.plugin``, registered through the
``pytest11`` entry point), whose fixtures wrap everything here; see
``docs/testing.md``. Importing this package imports boto3 (through
:mod:`kinesis_src`), never pyspark.
"""

from ..workload import KeyedProducer, decode, encode
from .clients import LOADED_READ_TIMEOUT_S, LOADED_RETRY, IdempotentKinesisClient, emulator_settings
from .endpoints import (
    Endpoints,
    EndpointsUnavailable,
    embedded_endpoints,
    endpoints,
    endpoints_from_environ,
)
from .streams import (
    Resharder,
    ReshardError,
    ReshardStep,
    Shard,
    StreamFactory,
    unique_stream_name,
)
from .verify import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    DeliveryError,
    DeliveryReport,
    OrderViolation,
    verify_delivery,
)

__all__ = [
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "LOADED_READ_TIMEOUT_S",
    "LOADED_RETRY",
    "DeliveryError",
    "DeliveryReport",
    "Endpoints",
    "EndpointsUnavailable",
    "IdempotentKinesisClient",
    "KeyedProducer",
    "OrderViolation",
    "ReshardError",
    "ReshardStep",
    "Resharder",
    "Shard",
    "StreamFactory",
    "decode",
    "embedded_endpoints",
    "emulator_settings",
    "encode",
    "endpoints",
    "endpoints_from_environ",
    "unique_stream_name",
    "verify_delivery",
]
