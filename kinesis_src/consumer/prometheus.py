"""Prometheus exposition of a Consumer's figures (the ``prometheus`` extra).

Register :class:`ConsumerCollector` on your registry, or serve one with :func:`serve_metrics`. A
scrape copies each metrics object first (it runs on the server's thread); names: docs/metrics.md."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ConfigurationError
from ..retry import RETRIES
from .metrics import ConsumerMetrics, ShardMetrics
from .processing.metrics import ProcessingMetrics

try:
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "kinesis_src.consumer.prometheus needs prometheus_client: pip install 'kinesis-src[prometheus]'"
    ) from exc

PREFIX = "kinesis_src_consumer"
CONSUMER_LABELS = ("application", "stream", "worker")
SHARD_LABELS = (*CONSUMER_LABELS, "shard", "key_range")  # key_range: "" for the whole hash space
FAILURE_LABELS = (*CONSUMER_LABELS, "code")  # code: what AWS sent, else the error's class


@dataclass(frozen=True)
class Figure:
    """One exported figure: its name (without prefix and ``_total``), its help text, and where it is read."""

    name: str
    help: str
    attribute: str
    counter: bool = True
    scale: float = 1.0  # exported value = attribute x scale (microseconds -> seconds)


# Consumer-wide figures, one series per (application, stream, worker): a consumer of several
# streams has one series per stream (its ``metrics.streams``); sum() over stream gives its totals.
CONSUMER_FIGURES: tuple[Figure, ...] = (
    Figure("records", "Records delivered to the application (KPL user records; redeliveries included).", "records"),
    Figure("bytes", "Bytes of record data delivered to the application.", "bytes"),
    Figure("batches", "Batches delivered to the application.", "batches"),
    Figure("checkpoints", "Checkpoint writes that succeeded.", "checkpoints"),
    Figure("checkpoint_write_seconds", "Time spent in successful checkpoint writes (divide by checkpoints for "
           "the mean latency).", "checkpoint_write_us", scale=1e-6),
    Figure("leases_taken", "Leases acquired (a shard taken again counts again).", "leases_taken"),
    Figure("leases_lost", "Leases lost involuntarily (taken over, or the coordinator failed).", "leases_lost"),
    Figure("leases_released", "Leases handed off gracefully (rebalancing or shutdown).", "leases_released"),
    Figure("shards_ended", "Shards read and checkpointed to SHARD_END.", "shards_ended"),
    Figure("shard_ends_failed", "SHARD_END checkpoint writes that failed (the next owner reads the tail again).",
           "shard_ends_failed"),
    Figure("checkpoints_expired", "Holdings that started after a checkpoint retention had already trimmed.",
           "checkpoints_expired"),
    Figure("aggregates", "KPL aggregated records expanded into user records.", "aggregates"),
    Figure("aggregates_malformed", "KPL aggregated records that failed their MD5 or did not parse.",
           "aggregates_malformed"),
    Figure("records_filtered", "Records of straddled shards left out by the consumer's key_range.",
           "records_filtered"),
    Figure("efo_resubscribes", "EFO subscriptions a holding opened after its first (event stream failures, "
           "takeovers, outages, and the service's end of each subscription after 5 minutes).", "efo_resubscribes"),
    Figure("leases_held", "Leases this worker holds now.", "leases_held", counter=False),
    Figure("shards_held_past_end", "Shards whose end was seen over end_ack_warning_s ago and is still not "
           "checkpointed (their children wait).", "shards_held_past_end", counter=False),
)

# Per-shard figures, one series per (application, stream, worker, shard) while the lease is held.
SHARD_FIGURES: tuple[Figure, ...] = (
    Figure("shard_millis_behind_latest", "Kinesis' MillisBehindLatest from the shard's last GetRecords or event.",
           "millis_behind_latest", counter=False),
    Figure("shard_records", "Records of this shard delivered since this worker took its lease.", "records"),
    Figure("shard_bytes", "Bytes of this shard delivered since this worker took its lease.", "bytes"),
    Figure("shard_held_past_end_seconds", "Seconds since the shard's end was seen, while its last batch is "
           "not checkpointed.", "held_past_end_s", counter=False),
)

# EFO event streams that failed, one series per (application, stream, worker, code).
EVENT_STREAM_FAILURES = Figure(
    "efo_event_stream_failures", "EFO event streams that failed, by error code (each cost its shard a resubscribe).",
    "efo_event_stream_failures",
)

# Figures of ``process()`` (parallel processing), one series per (application, stream, worker); the
# stream label names every stream the consumer reads, comma-joined, as one run covers them all.
PROCESSING_FIGURES: tuple[Figure, ...] = (
    Figure("processing_in_flight", "Handler calls running now.", "in_flight", counter=False),
    Figure("processing_buffered_records", "Records held in memory now (waiting, running, retrying, or done but "
           "not yet below the checkpoint).", "buffered_records", counter=False),
    Figure("processing_buffered_bytes", "Bytes of the records held in memory now.", "buffered_bytes", counter=False),
    Figure("processing_deliveries", "Handler calls.", "deliveries"),
    Figure("processing_redelivered", "Handler calls with a delivery_count above 1.", "redelivered"),
    Figure("processing_accepted", "Records the handler accepted (returned).", "accepted"),
    Figure("processing_released", "Records the handler released (raised Release): delivered again later.",
           "released"),
    Figure("processing_rejected", "Records the handler rejected (raised Reject): dead-lettered now.", "rejected"),
    Figure("processing_failed", "Handler calls that raised any other exception (retried with backoff).", "failed"),
    Figure("processing_dead_lettered", "Records handed to the dead letter (rejected, or out of attempts).",
           "dead_lettered"),
    Figure("processing_checkpoints", "Checkpoint writes process() made.", "checkpoints"),
    Figure("processing_abandoned", "Records dropped unfinished (lease lost or released, or stopping): the next "
           "owner delivers them again.", "abandoned"),
)


@dataclass(frozen=True)
class Source:
    """What the collector reads from one consumer: its identity labels and its live metrics.
    ``stream`` labels a metrics object without per-stream parts; else each stream labels its own."""

    application: str
    stream: str
    metrics: ConsumerMetrics
    processing: ProcessingMetrics | None = None

    @classmethod
    def of(cls, consumer: Any, processing: ProcessingMetrics | None = None) -> Source:
        """Accept a :class:`Consumer`, a :class:`BlockingConsumer` (its ``.consumer``), or a Source."""
        if processing is not None and not isinstance(processing, ProcessingMetrics):
            raise ConfigurationError(
                f"processing must be the ProcessingMetrics passed to process(metrics=...), got {type(processing).__name__}"
            )
        if isinstance(consumer, Source):
            return consumer if processing is None else replace(consumer, processing=processing)
        inner = getattr(consumer, "consumer", consumer)
        metrics = getattr(inner, "metrics", None)
        if not isinstance(metrics, ConsumerMetrics):
            raise ConfigurationError(
                f"ConsumerCollector needs a kinesis_src Consumer or BlockingConsumer, got {type(consumer).__name__}"
            )
        config = inner.config
        return cls(config.application_name, ",".join(config.streams), metrics, processing)

    def labels(self, stream: str) -> list[str]:
        return [self.application, stream, self.metrics.worker_id]


class ConsumerCollector(Collector):
    """A ``prometheus_client`` collector over one or more consumers' :class:`ConsumerMetrics`.

    One collector serves every consumer of a process (a registry refuses two exporting the same
    names): pass them all, or :meth:`add` them as they start; ``add(consumer, processing=metrics)``
    exports ``process()``'s figures too."""

    def __init__(self, consumers: Any | Iterable[Any] = ()) -> None:
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        for consumer in _as_list(consumers):
            self.add(consumer)

    def add(self, consumer: Any, processing: ProcessingMetrics | None = None) -> None:
        source = Source.of(consumer, processing)
        with self._lock:
            self._sources.append(source)

    def remove(self, consumer: Any) -> None:
        """Stop exporting a consumer (e.g. after it closed), so its series vanish from the next scrape."""
        metrics = Source.of(consumer).metrics
        with self._lock:
            self._sources = [s for s in self._sources if s.metrics is not metrics]

    def describe(self) -> Iterator[Any]:
        """The names, without reading any consumer: lets a registry refuse duplicates at register()."""
        yield from _families()
        yield _retries()

    def collect(self) -> Iterator[Any]:
        with self._lock:
            sources = list(self._sources)
        families = _families()
        by_name = {family.name: family for family in families}
        for source in sources:
            _add_samples(by_name, source)
        yield from families
        yield _retries()


def _retries() -> Any:
    """The process's retries by error class (``ThrottledError``: throttles); process-wide, as the retry helper is."""
    family = CounterMetricFamily(
        "kinesis_src_retries", "AWS calls retried by this process, by the error retried.", labels=("error",)
    )
    for error, count in sorted(RETRIES.snapshot().items()):
        family.add_metric([error], count)
    return family


def _as_list(consumers: Any | Iterable[Any]) -> list[Any]:
    if isinstance(consumers, (list, tuple, set, frozenset)):
        return list(consumers)
    return [consumers]


def _family(figure: Figure, labels: tuple[str, ...]) -> Any:
    kind = CounterMetricFamily if figure.counter else GaugeMetricFamily
    return kind(f"{PREFIX}_{figure.name}", figure.help, labels=labels)


def _families() -> list[Any]:
    return ([_family(f, CONSUMER_LABELS) for f in (*CONSUMER_FIGURES, *PROCESSING_FIGURES)]
            + [_family(f, SHARD_LABELS) for f in SHARD_FIGURES] + [_family(EVENT_STREAM_FAILURES, FAILURE_LABELS)])


def _add_samples(by_name: dict[str, Any], source: Source) -> None:
    per_stream = sorted(source.metrics.streams.items()) or [(source.stream, source.metrics)]
    for stream, live in per_stream:
        metrics, shards = _copy(live)
        labels = source.labels(stream)
        for figure in CONSUMER_FIGURES:
            value = len(shards) if figure.attribute == "leases_held" else getattr(metrics, figure.attribute)
            by_name[f"{PREFIX}_{figure.name}"].add_metric(labels, value * figure.scale)
        for code, count in sorted(metrics.efo_event_stream_failures.items()):
            by_name[f"{PREFIX}_{EVENT_STREAM_FAILURES.name}"].add_metric([*labels, code], count)
        for shard in shards:
            for figure in SHARD_FIGURES:
                value = getattr(shard, figure.attribute)
                if value is not None:  # no lag figure before the first page; no end seen yet
                    by_name[f"{PREFIX}_{figure.name}"].add_metric([*labels, shard.shard_id, shard.key_range], value)
    if source.processing is not None:
        processing = replace(source.processing)
        for figure in PROCESSING_FIGURES:
            by_name[f"{PREFIX}_{figure.name}"].add_metric(source.labels(source.stream), getattr(processing, figure.attribute))


def _copy(metrics: ConsumerMetrics) -> tuple[ConsumerMetrics, list[ShardMetrics]]:
    """A copy made without iterating the live dicts in Python code (the consumer's loop may change them meanwhile)."""
    shards = sorted((replace(s) for s in list(metrics.shards.values())), key=lambda s: s.shard_id)
    failures = dict(metrics.efo_event_stream_failures)  # one C-level copy, as list() above
    return replace(metrics, efo_event_stream_failures=failures, shards={}, streams={}), shards


@dataclass(frozen=True)
class MetricsServer:
    """A running exposition endpoint; :meth:`close` stops it (it also stops with the process)."""

    port: int
    address: str
    registry: CollectorRegistry
    collector: ConsumerCollector
    _server: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve_metrics(consumers: Any | Iterable[Any], port: int = 9108, address: str = "127.0.0.1",
                  registry: CollectorRegistry | None = None,
                  processing: ProcessingMetrics | None = None) -> MetricsServer:
    """Serve the consumers' figures at ``http://address:port/metrics`` from a thread.

    Returns the server. ``port=0`` picks a free port; the default address is loopback (``"0.0.0.0"``
    lets another host scrape). Without ``registry`` a fresh one holds only these figures.
    ``processing`` (one consumer only) adds those of ``process(..., metrics=processing)``."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigurationError(f"serve_metrics: port must be an integer in 0..65535 (0 picks a free port), got {port!r}")
    listed = _as_list(consumers)
    if processing is not None and len(listed) != 1:
        raise ConfigurationError(f"serve_metrics: processing= goes with one consumer, got {len(listed)}: use "
                                 "ConsumerCollector.add(consumer, processing=...) for each")
    collector = ConsumerCollector()
    for consumer in listed:
        collector.add(consumer, processing)
    registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
    registry.register(collector)
    server, thread = start_http_server(port, addr=address, registry=registry)
    return MetricsServer(int(server.server_address[1]), address, registry, collector, server, thread)
