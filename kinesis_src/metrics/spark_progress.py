"""The Kinesis source's figures from a streaming query's progress, as Prometheus metrics.

A Python source cannot fill ``sources[].metrics``: the figures come in ``sources[].latestOffset``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError

try:
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("kinesis_src.metrics needs prometheus_client: pip install 'kinesis-src[prometheus]'") from exc

PREFIX = "kinesis_src_spark"


@dataclass(frozen=True)
class SourceFigures:
    """What one Kinesis source reported in one progress.

    Per (stream, shard): lag, and read totals since the driver started; per stream: data loss.
    """

    lag_ms: Mapping[tuple[str, str], int]
    records_read: Mapping[tuple[str, str], int]
    trimmed_shards: Mapping[str, int]
    partly_trimmed_shards: Mapping[str, int]
    input_rows: int
    bytes_read: Mapping[tuple[str, str], int] = field(default_factory=dict)
    throttles: Mapping[tuple[str, str], int] = field(default_factory=dict)
    retries: Mapping[tuple[str, str], int] = field(default_factory=dict)


SHARD_MAPS = ("recordsRead", "bytesRead", "throttles", "retries")  # per-shard counts in a report, besides the lag


def source_figures(source: Mapping[str, Any]) -> SourceFigures | None:
    """The figures of one ``sources[]`` entry, or None when it is not a Kinesis source (no lag report)."""
    report = _json(source.get("latestOffset"))
    if not isinstance(report, dict) or "millisBehindLatest" not in report:
        return None
    lags = report.get("millisBehindLatest") or {}
    if all(isinstance(v, dict) for v in lags.values()) and lags:  # several streams: keyed by stream first
        per_stream = {key: report.get(key) or {} for key in ("millisBehindLatest", "dataLoss", *SHARD_MAPS)}
    else:
        stream = _stream_name(_json(source.get("endOffset")))
        per_stream = {key: {stream: report.get(key) or {}} for key in ("millisBehindLatest", "dataLoss", *SHARD_MAPS)}
    counts = {key: _by_shard(per_stream[key]) for key in SHARD_MAPS}
    per_stream_loss = per_stream["dataLoss"]
    return SourceFigures(
        _by_shard(per_stream["millisBehindLatest"]),
        counts["recordsRead"],
        {stream: int(loss.get("trimmedShards", 0)) for stream, loss in per_stream_loss.items()},
        {stream: int(loss.get("partlyTrimmedShards", 0)) for stream, loss in per_stream_loss.items()},
        int(source.get("numInputRows") or 0),
        bytes_read=counts["bytesRead"],
        throttles=counts["throttles"],
        retries=counts["retries"],
    )


def _by_shard(per_stream: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """``{stream: {shard: n}}`` as ``{(stream, shard): n}``; a null figure (no lag known yet) is left out."""
    return {(stream, shard): int(n) for stream, shards in per_stream.items() for shard, n in shards.items()
            if n is not None}


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _stream_name(offset: Any) -> str:
    """The stream of a single-stream offset, from its recorded ARN (``...:stream/<name>``); "" if absent."""
    arn = ((offset or {}).get("stream") or {}).get("arn", "") if isinstance(offset, dict) else ""
    return arn.rsplit("/", 1)[-1] if "/" in arn else ""


class QueryProgressCollector(Collector):
    """Keeps each query's last progress and exports it; feed it with :meth:`update` or :func:`watch_queries`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Mapping[str, Any]] = {}

    def update(self, progress: Mapping[str, Any] | str) -> None:
        """Take a progress (``query.lastProgress``, or its ``.json`` text, or a listener event's)."""
        parsed = _json(progress)
        if not isinstance(parsed, Mapping) or not isinstance(parsed.get("sources"), list):
            raise ConfigurationError(
                "QueryProgressCollector.update takes a StreamingQueryProgress (query.lastProgress) or its JSON "
                f"text, got {type(progress).__name__}"
            )
        with self._lock:
            self._latest[_query_label(parsed)] = parsed

    def forget(self, query: str) -> None:
        """Drop a query's series (by its name or its id), e.g. when it terminated."""
        with self._lock:
            for label, progress in list(self._latest.items()):
                if query in (label, str(progress.get("id"))):
                    del self._latest[label]

    def describe(self) -> Iterator[Any]:
        yield from _families().values()

    def collect(self) -> Iterator[Any]:
        with self._lock:
            latest = dict(self._latest)
        families = _families()
        for query, progress in sorted(latest.items()):
            _add_query(families, query, progress)
        yield from families.values()


def _query_label(progress: Mapping[str, Any]) -> str:
    return str(progress.get("name") or progress.get("id"))


def _families() -> dict[str, Any]:
    specs = {
        "batch_id": ("The last micro-batch's id.", ["query"]),
        "batch_duration_ms": ("The last micro-batch's duration.", ["query"]),
        "input_rows": ("Rows the last micro-batch read from every source.", ["query"]),
        "input_rows_per_second": ("Rows per second arriving, over the last micro-batch.", ["query"]),
        "processed_rows_per_second": ("Rows per second processed, over the last micro-batch.", ["query"]),
        "source_input_rows": ("Rows the last micro-batch read from this Kinesis source.", ["query", "source"]),
        "millis_behind_latest": ("Kinesis' MillisBehindLatest of the shard's last read, as the source reported it.",
                                 ["query", "source", "stream", "shard"]),
        "shard_records_read": (("Records the source read from the shard over the batches planned since the "
                                "driver started."), ["query", "source", "stream", "shard"]),
        "shard_bytes_read": (("Bytes of record data the source read from the shard over the batches planned since "
                              "the driver started."), ["query", "source", "stream", "shard"]),
        "shard_throttles": (("Throttled requests the source's tasks retried while reading the shard, over the "
                             "batches planned since the driver started."), ["query", "source", "stream", "shard"]),
        "shard_retries": (("Requests the source's tasks retried (throttles included) while reading the shard, over "
                           "the batches planned since the driver started."), ["query", "source", "stream", "shard"]),
        "trimmed_shards": (("Shards skipped whole because retention trimmed them (failOnDataLoss=false), since the "
                           "driver started."), ["query", "source", "stream"]),
        "partly_trimmed_shards": (("Shards whose checkpointed position retention passed (records lost), since the "
                                  "driver started."), ["query", "source", "stream"]),
    }
    return {name: GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=labels) for name, (text, labels) in specs.items()}


def _add_query(families: dict[str, Any], query: str, progress: Mapping[str, Any]) -> None:
    for name, key in (("batch_id", "batchId"), ("batch_duration_ms", "batchDuration"), ("input_rows", "numInputRows"),
                      ("input_rows_per_second", "inputRowsPerSecond"),
                      ("processed_rows_per_second", "processedRowsPerSecond")):
        if progress.get(key) is not None:
            families[name].add_metric([query], float(progress[key]))
    for index, source in enumerate(progress["sources"]):
        figures = source_figures(source)
        if figures is None:
            continue
        label = str(index)  # sources[] position: the description is a Java object name, not stable
        families["source_input_rows"].add_metric([query, label], figures.input_rows)
        for (stream, shard), lag in sorted(figures.lag_ms.items()):
            families["millis_behind_latest"].add_metric([query, label, stream, shard], lag)
        for name, counts in (("shard_records_read", figures.records_read), ("shard_bytes_read", figures.bytes_read),
                             ("shard_throttles", figures.throttles), ("shard_retries", figures.retries)):
            for (stream, shard), count in sorted(counts.items()):
                families[name].add_metric([query, label, stream, shard], count)
        for stream, count in sorted(figures.trimmed_shards.items()):
            families["trimmed_shards"].add_metric([query, label, stream], count)
        for stream, count in sorted(figures.partly_trimmed_shards.items()):
            families["partly_trimmed_shards"].add_metric([query, label, stream], count)


def watch_queries(spark: Any, collector: QueryProgressCollector) -> Any:
    """Register a listener on ``spark`` that feeds ``collector`` every progress; returns it (for removeListener)."""
    # imported here, not at the top: pyspark comes with the spark extra, which the Consumer does not need
    from pyspark.sql.streaming import StreamingQueryListener

    class _Feed(StreamingQueryListener):
        """Runs on the driver's Python process: progress JSON in, the collector's last progress updated."""

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            collector.update(event.progress.json)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            collector.forget(str(event.id))

    listener = _Feed()
    spark.streams.addListener(listener)
    return listener
