"""The Prometheus exposition of a consumer's figures: parse the text a scrape returns and compare every value."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_src.consumer import (
    BlockingConsumer,
    Consumer,
    ConsumerMetrics,
    ShardMetrics,
)
from kinesis_src.consumer.processing import ProcessingMetrics
from kinesis_src.consumer.prometheus import (
    CONSUMER_FIGURES,
    PROCESSING_FIGURES,
    SHARD_FIGURES,
    ConsumerCollector,
    Source,
    serve_metrics,
)
from kinesis_src.errors import ConfigurationError
from kinesis_src.metrics import QueryProgressCollector, source_figures

P = "kinesis_src_consumer_"


def _consumer(worker: str = "w-1", stream: str | list[str] = "orders", app: str = "billing") -> Consumer:
    """A real consumer object, never started: its metrics are filled by hand below."""
    return Consumer(stream, application_name=app, worker_id=worker, region="us-east-1",
                    endpoint_url="http://127.0.0.1:9", handle_signals=False)


def _of(consumer: Consumer, stream: str = "orders") -> Any:
    """The metrics one stream's part of the consumer writes to (its counters move the totals too)."""
    return consumer.readers[stream].metrics


def _fill(metrics: Any) -> None:
    metrics.records, metrics.bytes, metrics.batches, metrics.checkpoints = 1200, 98765, 12, 7
    metrics.leases_taken, metrics.leases_lost, metrics.leases_released = 5, 2, 1
    metrics.shards_ended, metrics.shard_ends_failed, metrics.shards_held_past_end = 3, 1, 1
    metrics.checkpoints_expired, metrics.aggregates, metrics.aggregates_malformed = 4, 9, 2
    metrics.checkpoint_write_us, metrics.efo_resubscribes = 2_500_000, 6
    metrics.shards["shardId-000000000001"] = ShardMetrics("shardId-000000000001", millis_behind_latest=1500,
                                                          records=700, bytes=5600, held_past_end_s=42.5)
    metrics.shards["shardId-000000000002"] = ShardMetrics("shardId-000000000002", records=500, bytes=4000)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by (sample name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _scrape(*consumers: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(list(consumers)))
    return _samples(generate_latest(registry).decode())


def _labels(worker: str = "w-1", shard: str | None = None, stream: str = "orders", app: str = "billing",
            key_range: str = ""):
    labels = {"application": app, "stream": stream, "worker": worker}
    if shard is not None:
        labels["shard"] = shard
        labels["key_range"] = key_range
    return tuple(sorted(labels.items()))


def test_every_consumer_figure_is_exported_with_its_value() -> None:
    consumer = _consumer()
    _fill(_of(consumer))
    samples = _scrape(consumer)
    expected = {
        "records_total": 1200, "bytes_total": 98765, "batches_total": 12, "checkpoints_total": 7,
        "leases_taken_total": 5, "leases_lost_total": 2, "leases_released_total": 1,
        "shards_ended_total": 3, "shard_ends_failed_total": 1, "checkpoints_expired_total": 4,
        "aggregates_total": 9, "aggregates_malformed_total": 2, "records_filtered_total": 0, "leases_held": 2,
        "shards_held_past_end": 1, "checkpoint_write_seconds_total": 2.5, "efo_resubscribes_total": 6,
    }
    got = {name: samples[(P + name, _labels())] for name in expected}
    assert got == expected
    assert len(CONSUMER_FIGURES) == len(expected)  # a new figure needs its expected value here


def test_per_shard_figures_carry_the_shard_label_and_skip_unknown_values() -> None:
    consumer = _consumer()
    _fill(_of(consumer))
    samples = _scrape(consumer)
    one, two = _labels(shard="shardId-000000000001"), _labels(shard="shardId-000000000002")
    per_shard = {key: value for key, value in samples.items() if dict(key[1]).get("shard")}
    assert per_shard == {
        (P + "shard_millis_behind_latest", one): 1500,
        (P + "shard_records_total", one): 700,
        (P + "shard_bytes_total", one): 5600,
        (P + "shard_held_past_end_seconds", one): 42.5,
        # shard 2 has no lag figure yet (no page read) and no end seen: those series are absent, not 0
        (P + "shard_records_total", two): 500,
        (P + "shard_bytes_total", two): 4000,
    }
    assert len(SHARD_FIGURES) == 4


def test_several_consumers_in_one_collector_are_told_apart_by_worker_and_stream() -> None:
    first, second = _consumer("w-1"), _consumer("w-2", stream="refunds")
    _of(first).records, _of(second, "refunds").records = 10, 20
    _of(second, "refunds").shards["shardId-000000000007"] = ShardMetrics("shardId-000000000007", millis_behind_latest=0)
    samples = _scrape(first, second)
    assert samples[(P + "records_total", _labels("w-1"))] == 10
    assert samples[(P + "records_total", _labels("w-2", stream="refunds"))] == 20
    assert samples[(P + "shard_millis_behind_latest", _labels("w-2", "shardId-000000000007", "refunds"))] == 0


def test_a_removed_consumer_vanishes_and_an_added_one_appears() -> None:
    first, second = _consumer("w-1"), _consumer("w-2")
    collector = ConsumerCollector(first)
    registry = CollectorRegistry()
    registry.register(collector)
    collector.add(second)
    collector.remove(first)
    series = [dict(labels) for (_name, labels) in _samples(generate_latest(registry).decode())]
    workers = {labels["worker"] for labels in series if "error" not in labels}  # retries are process-wide
    assert workers == {"w-2"}


def test_the_scrape_reads_live_figures_not_a_copy_taken_at_registration() -> None:
    consumer = _consumer()
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(consumer))
    before = _samples(generate_latest(registry).decode())[(P + "records_total", _labels())]
    _of(consumer).records += 3
    after = _samples(generate_latest(registry).decode())[(P + "records_total", _labels())]
    assert (before, after) == (0, 3)


def test_a_blocking_consumer_is_read_through_its_inner_consumer() -> None:
    blocking = BlockingConsumer("orders", application_name="billing", worker_id="w-9", region="us-east-1",
                                endpoint_url="http://127.0.0.1:9")
    _of(blocking.consumer).checkpoints = 6
    assert Source.of(blocking) == Source("billing", "orders", blocking.consumer.metrics)
    assert _scrape(blocking)[(P + "checkpoints_total", _labels("w-9"))] == 6


def test_registering_a_second_collector_with_the_same_names_is_refused_at_register() -> None:
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(_consumer("w-1")))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(ConsumerCollector(_consumer("w-2")))


def test_something_that_is_not_a_consumer_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="Consumer or BlockingConsumer, got dict"):
        ConsumerCollector({"records": 1})


@pytest.mark.parametrize("port", [-1, 70000, "9108", True])
def test_serve_metrics_refuses_a_bad_port_naming_it(port: object) -> None:
    with pytest.raises(ConfigurationError, match="port must be an integer in 0..65535"):
        serve_metrics(_consumer(), port=port)  # type: ignore[arg-type]


def test_serve_metrics_serves_the_exposition_over_http_on_loopback() -> None:
    consumer = _consumer()
    _fill(_of(consumer))
    server = serve_metrics(consumer, port=0)
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(server.url, timeout=10) as response:
            samples = _samples(response.read().decode())
    finally:
        server.close()
    assert samples[(P + "shard_millis_behind_latest", _labels(shard="shardId-000000000001"))] == 1500
    assert samples[(P + "leases_lost_total", _labels())] == 2


def test_a_consumer_of_several_streams_has_series_per_stream_even_for_equal_shard_ids() -> None:
    consumer = _consumer(stream=["orders", "refunds"])
    for stream, records in (("orders", 3), ("refunds", 4)):
        _of(consumer, stream).records = records
        _of(consumer, stream).shards["shardId-000000000000"] = ShardMetrics(
            "shardId-000000000000", millis_behind_latest=records * 100, records=records)
    assert consumer.metrics.records == 7 and len(consumer.metrics.shards) == 2  # the totals, keyed stream/shard
    samples = _scrape(consumer)
    assert {key: value for key, value in samples.items() if key[0] in (P + "records_total", P + "leases_held")} == {
        (P + "records_total", _labels(stream="orders")): 3, (P + "records_total", _labels(stream="refunds")): 4,
        (P + "leases_held", _labels(stream="orders")): 1, (P + "leases_held", _labels(stream="refunds")): 1,
    }
    lags = {key: value for key, value in samples.items() if key[0] == P + "shard_millis_behind_latest"}
    assert lags == {
        (P + "shard_millis_behind_latest", _labels(shard="shardId-000000000000", stream="orders")): 300,
        (P + "shard_millis_behind_latest", _labels(shard="shardId-000000000000", stream="refunds")): 400,
    }


def test_a_bare_metrics_object_is_labelled_with_the_stream_given() -> None:
    metrics = ConsumerMetrics("w-5")
    metrics.records = 11
    metrics.shards["shardId-000000000003"] = ShardMetrics("shardId-000000000003", bytes=64)
    samples = _scrape(Source("billing", "orders", metrics))
    assert samples[(P + "records_total", _labels("w-5"))] == 11
    assert samples[(P + "shard_bytes_total", _labels("w-5", "shardId-000000000003"))] == 64


def test_processing_figures_are_exported_when_their_metrics_object_is_handed_over() -> None:
    consumer = _consumer(stream=["orders", "refunds"])
    processing = ProcessingMetrics(in_flight=3, buffered_records=40, buffered_bytes=4096, deliveries=120,
                                   redelivered=9, accepted=100, released=6, rejected=2, failed=12,
                                   dead_lettered=3, checkpoints=15, abandoned=1)
    collector = ConsumerCollector()
    collector.add(consumer, processing=processing)
    registry = CollectorRegistry()
    registry.register(collector)
    samples = _samples(generate_latest(registry).decode())
    labels = _labels(stream="orders,refunds")  # one process() run covers every stream of the consumer
    got = {name[len(P + "processing_"):]: value for (name, key), value in samples.items()
           if name.startswith(P + "processing_") and key == labels}
    assert got == {
        "in_flight": 3, "buffered_records": 40, "buffered_bytes": 4096, "deliveries_total": 120,
        "redelivered_total": 9, "accepted_total": 100, "released_total": 6, "rejected_total": 2,
        "failed_total": 12, "dead_lettered_total": 3, "checkpoints_total": 15, "abandoned_total": 1,
    }
    assert len(PROCESSING_FIGURES) == len(got)
    processing.in_flight = 0
    assert _samples(generate_latest(registry).decode())[(P + "processing_in_flight", labels)] == 0  # read live


def test_without_processing_metrics_no_processing_series_appear() -> None:
    assert not [name for (name, _labels) in _scrape(_consumer()) if "processing" in name]


def test_processing_metrics_of_the_wrong_kind_or_for_several_consumers_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="processing must be the ProcessingMetrics passed to process"):
        ConsumerCollector().add(_consumer(), processing={"accepted": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="processing= goes with one consumer, got 2"):
        serve_metrics([_consumer("a"), _consumer("b")], port=0, processing=ProcessingMetrics())


@given(
    counts=st.lists(st.integers(min_value=0, max_value=2**53), min_size=4, max_size=4),
    lags=st.dictionaries(st.integers(0, 50).map(lambda i: f"shardId-{i:012d}"),
                         st.none() | st.integers(0, 86_400_000), max_size=6),
)
def test_exported_values_equal_the_metrics_object(counts: list[int], lags: dict[str, int | None]) -> None:
    consumer = _consumer()
    metrics = _of(consumer)
    metrics.records, metrics.bytes, metrics.leases_taken, metrics.leases_lost = counts
    for shard_id, lag in lags.items():
        metrics.shards[shard_id] = ShardMetrics(shard_id, millis_behind_latest=lag)
    samples = _scrape(consumer)
    assert [samples[(P + n, _labels())] for n in ("records_total", "bytes_total", "leases_taken_total",
                                                   "leases_lost_total")] == counts
    assert samples[(P + "leases_held", _labels())] == len(lags)
    exported_lags = {dict(labels)["shard"]: value for (name, labels), value in samples.items()
                     if name == P + "shard_millis_behind_latest"}
    assert exported_lags == {shard: lag for shard, lag in lags.items() if lag is not None}


# -- the Spark source's figures, from a query's progress ---------------------------------------------

# A real progress of a query reading stream "orders" (PySpark 4.3, kinesis-mock), lags edited to differ.
SPARK_PROGRESS = {
    "id": "9e7914e4-1739-45e1-980d-6cd47ae442c9", "runId": "e55f1519-df09-4605-bc6c-2369b7c7c11f",
    "name": "orders_etl", "timestamp": "2026-11-23T21:22:54.000Z", "batchId": 1, "batchDuration": 67,
    "durationMs": {"latestOffset": 67, "triggerExecution": 67}, "eventTime": {}, "stateOperators": [],
    "sources": [{
        "description": "org.apache.spark.sql.execution.datasources.v2.python."
                       "PythonMicroBatchStreamWithTriggerAvailableNow@443f465",
        "startOffset": '{"version": 1, "batch": 1, "shards": {}, "stream": {"arn": '
                       '"arn:aws:kinesis:us-east-1:000000000000:stream/orders", "created": "2026-11-23T21:20:10Z"}}',
        "endOffset": '{"version": 1, "batch": 1, "shards": {}, "stream": {"arn": '
                     '"arn:aws:kinesis:us-east-1:000000000000:stream/orders", "created": "2026-11-23T21:20:10Z"}}',
        "latestOffset": '{"millisBehindLatest": {"shardId-000000000000": 1200, "shardId-000000000001": 0}, '
                        '"dataLoss": {"trimmedShards": 1, "partlyTrimmedShards": 2}, '
                        '"recordsRead": {"shardId-000000000000": 150, "shardId-000000000001": 50}}',
        "numInputRows": 200, "inputRowsPerSecond": 20.0, "processedRowsPerSecond": 150.5, "metrics": {},
    }],
    "sink": {"description": "NoopTable", "numOutputRows": 0, "metrics": {}},
    "numInputRows": 200, "inputRowsPerSecond": 20.0, "processedRowsPerSecond": 150.5, "observedMetrics": {},
}


def _spark_scrape(*progresses: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    collector = QueryProgressCollector()
    for progress in progresses:
        collector.update(progress)  # type: ignore[arg-type]
    registry = CollectorRegistry()
    registry.register(collector)
    return _samples(generate_latest(registry).decode())


def test_a_query_progress_yields_the_sources_lag_per_shard_and_its_data_loss_counts() -> None:
    samples = _spark_scrape(json.dumps(SPARK_PROGRESS))  # the listener hands over the JSON text
    spark = "kinesis_src_spark_"
    def shard(shard_id: str) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({"query": "orders_etl", "source": "0", "stream": "orders", "shard": shard_id}.items()))

    per_stream = tuple(sorted({"query": "orders_etl", "source": "0", "stream": "orders"}.items()))
    query = (("query", "orders_etl"),)
    assert samples == {
        (spark + "millis_behind_latest", shard("shardId-000000000000")): 1200,
        (spark + "millis_behind_latest", shard("shardId-000000000001")): 0,
        (spark + "shard_records_read", shard("shardId-000000000000")): 150,
        (spark + "shard_records_read", shard("shardId-000000000001")): 50,
        (spark + "trimmed_shards", per_stream): 1,
        (spark + "partly_trimmed_shards", per_stream): 2,
        (spark + "source_input_rows", (("query", "orders_etl"), ("source", "0"))): 200,
        (spark + "batch_id", query): 1, (spark + "batch_duration_ms", query): 67, (spark + "input_rows", query): 200,
        (spark + "input_rows_per_second", query): 20.0, (spark + "processed_rows_per_second", query): 150.5,
    }


def test_several_streams_in_one_source_are_labelled_by_stream() -> None:
    source = dict(SPARK_PROGRESS["sources"][0])  # type: ignore[index]
    source["latestOffset"] = json.dumps({
        "millisBehindLatest": {"orders": {"shardId-000000000000": 5}, "refunds": {"shardId-000000000000": 7}},
        "dataLoss": {"orders": {"trimmedShards": 0, "partlyTrimmedShards": 0},
                     "refunds": {"trimmedShards": 3, "partlyTrimmedShards": 0}},
    })
    figures = source_figures(source)
    assert figures is not None
    assert dict(figures.lag_ms) == {("orders", "shardId-000000000000"): 5, ("refunds", "shardId-000000000000"): 7}
    assert dict(figures.trimmed_shards) == {"orders": 0, "refunds": 3}


def test_other_sources_and_a_first_progress_without_a_report_are_left_out() -> None:
    other = {"description": "KafkaV2[Subscribe[orders]]", "latestOffset": '{"orders": {"0": 42}}', "numInputRows": 5}
    unreported = {"description": "PythonMicroBatchStream@1", "latestOffset": None, "numInputRows": 0}
    assert source_figures(other) is None and source_figures(unreported) is None
    progress = {**SPARK_PROGRESS, "sources": [other, SPARK_PROGRESS["sources"][0]]}  # type: ignore[index]
    sources = {dict(labels).get("source") for (name, labels) in _spark_scrape(progress)
               if name == "kinesis_src_spark_millis_behind_latest"}
    assert sources == {"1"}  # labelled by its place in sources[]; the Kafka source has no series


def test_the_last_progress_wins_and_a_forgotten_query_vanishes() -> None:
    later = {**SPARK_PROGRESS, "batchId": 7}
    collector = QueryProgressCollector()
    collector.update(SPARK_PROGRESS)
    collector.update(later)
    registry = CollectorRegistry()
    registry.register(collector)
    assert _samples(generate_latest(registry).decode())[("kinesis_src_spark_batch_id", (("query", "orders_etl"),))] == 7
    collector.forget(str(SPARK_PROGRESS["id"]))  # by id, as the listener does when the query terminates
    assert _samples(generate_latest(registry).decode()) == {}


def test_something_that_is_not_a_progress_is_refused_naming_what_is_expected() -> None:
    with pytest.raises(ConfigurationError, match="takes a StreamingQueryProgress"):
        QueryProgressCollector().update("not json")


def test_the_process_retries_are_exported_by_the_error_retried() -> None:
    from kinesis_src.errors import ThrottledError
    from kinesis_src.retry import RETRIES, RetryPolicy, call_with_retry

    before = RETRIES.snapshot().get("ThrottledError", 0)
    failures = iter([ThrottledError("GetRecords throttled"), ThrottledError("GetRecords throttled")])

    def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "ok"

    assert call_with_retry(flaky, "GetRecords", RetryPolicy(initial_backoff_s=0.0, max_backoff_s=0.0), sleep=lambda _: None) == "ok"
    samples = _scrape(_consumer())
    assert samples[("kinesis_src_retries_total", (("error", "ThrottledError"),))] == before + 2


def test_two_key_range_units_of_one_shard_are_two_series_labelled_by_range() -> None:
    """A worker without a range may read two units of one shard (#11): neither hides the other."""
    from kinesis_src import KeyRange
    from kinesis_src.consumer.stream_reader import StreamReader

    consumer = _consumer()
    for index, records in ((0, 5), (1, 6)):
        reader = StreamReader(consumer.config, consumer.handout, "orders", consumer.stream_metrics["orders"],
                              KeyRange.slice(index, 2))
        reader.metrics.shards["shardId-000000000000"] = ShardMetrics("shardId-000000000000", records=records)
    records = {key: value for key, value in _scrape(consumer).items() if key[0] == P + "shard_records_total"}
    halves = [f"{r.start}-{r.end}" for r in (KeyRange.slice(0, 2), KeyRange.slice(1, 2))]
    assert records == {
        (P + "shard_records_total", _labels(shard="shardId-000000000000", key_range=halves[0])): 5,
        (P + "shard_records_total", _labels(shard="shardId-000000000000", key_range=halves[1])): 6,
    }
