"""The options of ``process()``, checked once, before anything is read (each error names its option)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ...errors import ConfigurationError
from .retries import Backoff

DEFAULT_MAX_BUFFERED_RECORDS = 10_000
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024


class Ordering(str, enum.Enum):
    """Which records may be in a handler at the same time.

    KEY: one record per partition key (per stream), so each key's records run in sequence order;
    UNORDERED: any, up to ``max_in_flight``; SHARD: one per shard, the plain loop's guarantee."""

    KEY = "key"
    UNORDERED = "unordered"
    SHARD = "shard"


@dataclass(frozen=True)
class ProcessingOptions:
    ordering: Ordering = Ordering.KEY
    max_in_flight: int = 64
    max_delivery_attempts: int = 5
    max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    retry_backoff: Backoff = field(default_factory=Backoff)
    checkpoint_interval_s: float = 1.0
    drain_timeout_s: float = 10.0


def parse_ordering(value: object) -> Ordering:
    if isinstance(value, Ordering):
        return value
    try:
        return Ordering(str(value).lower())
    except ValueError:
        accepted = ", ".join(repr(o.value) for o in Ordering)
        raise ConfigurationError(f"ordering must be one of {accepted}, got {value!r}") from None


def parse_options(
    *,
    ordering: object,
    max_in_flight: int,
    max_delivery_attempts: int,
    max_buffered_records: int,
    max_buffered_bytes: int,
    retry_backoff: Backoff | None,
    checkpoint_interval_s: float,
    drain_timeout_s: float,
) -> ProcessingOptions:
    """Every check that needs no I/O; the dead letter stream and the ordering claim come next."""
    _at_least("max_in_flight", max_in_flight, 1, "the number of handler calls running at once")
    _at_least("max_delivery_attempts", max_delivery_attempts, 1, "deliveries before a record is dead-lettered")
    _at_least("max_buffered_records", max_buffered_records, 1, "records held in memory")
    _at_least("max_buffered_bytes", max_buffered_bytes, 1, "bytes of record data held in memory")
    if max_buffered_records < max_in_flight:
        raise ConfigurationError(
            f"max_buffered_records ({max_buffered_records}) must be >= max_in_flight ({max_in_flight}): "
            "records in flight are buffered records; raise max_buffered_records or lower max_in_flight"
        )
    if checkpoint_interval_s < 0:
        raise ConfigurationError(f"checkpoint_interval_s must be >= 0, got {checkpoint_interval_s}")
    if drain_timeout_s < 0:
        raise ConfigurationError(f"drain_timeout_s must be >= 0, got {drain_timeout_s}")
    if retry_backoff is not None and not isinstance(retry_backoff, Backoff):
        raise ConfigurationError(
            f"retry_backoff must be a kinesis_src.consumer.processing.Backoff, got {type(retry_backoff).__name__}"
        )
    return ProcessingOptions(
        ordering=parse_ordering(ordering),
        max_in_flight=max_in_flight,
        max_delivery_attempts=max_delivery_attempts,
        max_buffered_records=max_buffered_records,
        max_buffered_bytes=max_buffered_bytes,
        retry_backoff=retry_backoff or Backoff(),
        checkpoint_interval_s=checkpoint_interval_s,
        drain_timeout_s=drain_timeout_s,
    )


def _at_least(name: str, value: object, minimum: int, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} ({meaning}) must be an integer >= {minimum}, got {value!r}")
