"""A testing kit for Kinesis pipelines: endpoints, streams, resharding, a keyed-counter workload.

With a pytest plugin, a checker and the embedded emulators (docs/testing.md); lazy imports.
"""


from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs; at run time see _EXPORTS
    from .clients import LOADED_READ_TIMEOUT_S, LOADED_RETRY, IdempotentKinesisClient, emulator_settings
    from .endpoints import Endpoints, EndpointsUnavailable, embedded_endpoints, endpoints, endpoints_from_environ
    from .file_sink import read_file_sink
    from .producer import KeyedProducer, decode, encode, split_then_merge
    from .streams import Resharder, ReshardError, ReshardStep, Shard, StreamFactory, unique_stream_name
    from .verify import (AT_LEAST_ONCE, EXACTLY_ONCE, DeliveryError, DeliveryReport, OrderReport, OrderViolation,
                         check_order, verify_delivery)

_MODULES: dict[str, tuple[str, ...]] = {
    "kinesis_src.testing.producer": ("KeyedProducer", "decode", "encode", "split_then_merge"),
    "kinesis_src.testing.file_sink": ("read_file_sink",),
    "kinesis_src.testing.clients": ("LOADED_READ_TIMEOUT_S", "LOADED_RETRY", "IdempotentKinesisClient",
                                    "emulator_settings"),
    "kinesis_src.testing.endpoints": ("Endpoints", "EndpointsUnavailable", "embedded_endpoints", "endpoints",
                                      "endpoints_from_environ"),
    "kinesis_src.testing.streams": ("Resharder", "ReshardError", "ReshardStep", "Shard", "StreamFactory",
                                    "unique_stream_name"),
    "kinesis_src.testing.verify": ("AT_LEAST_ONCE", "EXACTLY_ONCE", "DeliveryError", "DeliveryReport",
                                   "OrderReport", "OrderViolation", "check_order", "verify_delivery"),
}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
