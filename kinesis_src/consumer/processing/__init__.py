"""Parallel processing beyond shards: many records of a shard in handlers at once, each acknowledged
on its own (ACCEPT by returning, RELEASE / REJECT by raising), with redelivery and a dead letter.
Built on ``batch.checkpoint(record)``; see docs/processing.md."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigurationError
from .dead_letter import (
    CallableDeadLetter,
    DeadLetter,
    DeadLetterCallable,
    DeadLetterReason,
    StreamDeadLetter,
    not_started,
    open_dead_letter,
)
from .delivered import DeliveredRecord
from .metrics import ProcessingMetrics
from .options import (
    DEFAULT_MAX_BUFFERED_BYTES,
    DEFAULT_MAX_BUFFERED_RECORDS,
    Ordering,
    parse_options,
)
from .ordering_claim import claim_ordering
from .outcomes import Outcome, Reject, Release
from .processor import Handler, Processor
from .retries import Backoff

__all__ = [
    "Backoff",
    "CallableDeadLetter",
    "DeadLetter",
    "DeadLetterReason",
    "DeliveredRecord",
    "Ordering",
    "Outcome",
    "ProcessingMetrics",
    "Reject",
    "Release",
    "StreamDeadLetter",
    "process",
]


async def process(
    consumer: Any,
    handler: Handler,
    *,
    ordering: str | Ordering = "key",
    max_in_flight: int = 64,
    max_delivery_attempts: int = 5,
    dead_letter: str | DeadLetterCallable | None = None,
    max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS,
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
    retry_backoff: Backoff | None = None,
    checkpoint_interval_s: float = 1.0,
    drain_timeout_s: float = 10.0,
    metrics: ProcessingMetrics | None = None,
) -> ProcessingMetrics:
    """Process the started ``consumer``'s records with ``handler`` until it stops.

    ``handler(record)`` gets a :class:`DeliveredRecord`: returning accepts it, :class:`Release`
    redelivers it later, :class:`Reject` dead-letters it, anything else is retried with
    ``retry_backoff`` up to ``max_delivery_attempts``, then dead-lettered (no ``dead_letter``:
    RecordNotProcessedError). Returns the metrics. Options are checked before any record is
    taken (docs/processing.md)."""
    options = parse_options(
        ordering=ordering, max_in_flight=max_in_flight, max_delivery_attempts=max_delivery_attempts,
        max_buffered_records=max_buffered_records, max_buffered_bytes=max_buffered_bytes,
        retry_backoff=retry_backoff, checkpoint_interval_s=checkpoint_interval_s, drain_timeout_s=drain_timeout_s,
    )
    if not callable(handler):
        raise ConfigurationError(f"handler must be a callable taking one record, got {type(handler).__name__}")
    config, handout = consumer.config, consumer.handout
    sink = await open_dead_letter(dead_letter, handout.kinesis)
    if handout.dynamodb is None:
        raise not_started()
    for stream in config.streams:
        await claim_ordering(handout.dynamodb, config.lease_table_name, config.application_name, stream,
                             options.ordering, config.worker_id)
    metrics = metrics if metrics is not None else ProcessingMetrics()
    await Processor(consumer, handler, options, sink, metrics).run()
    return metrics

