"""A running consumer's Prometheus endpoint, scraped over HTTP, on kinesis-mock + DynamoDB Local.

The consumer reads a two-shard stream of known records; the scrape must show
exactly what was read (records and bytes, overall and per shard), the two
leases taken, a lag figure per shard, the checkpoints written, and after a
graceful close the two leases released and none held. A second test runs
``process()`` and scrapes its outcome counts while it runs.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for  # tests/waiting.py

from kinesis_src import BlockingConsumer, LeaseTiming
from kinesis_src.aws import KinesisClient
from kinesis_src.consumer.processing import ProcessingMetrics, Reject, Release
from kinesis_src.consumer.prometheus import serve_metrics

pytestmark = pytest.mark.integration

APP = "prometheus-tests"
APP_PROCESS = "prometheus-process-tests"  # its own lease table: process() records its ordering per application
P = "kinesis_src_consumer_"
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted labels -> value}, parsed from the exposition text."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def by_shard(samples: dict[tuple[tuple[str, str], ...], float]) -> dict[str, float]:
    return {dict(labels)["shard"]: value for labels, value in samples.items()}


def test_a_running_consumer_is_scraped_over_http(kinesis: KinesisClient, stream_name: str, emulator_env) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    entries = [(f"key-{i}", f"value-{i:03d}".encode() * (1 + i % 3)) for i in range(40)]
    kinesis.put_records(stream_name, entries)
    per_shard: Counter[str] = Counter()
    bytes_read, checkpoints = 0, 0
    consumer = BlockingConsumer(stream_name, application_name=APP, worker_id="prom-1", lease_timing=TIMING,
                                idle_interval_s=0.1)
    server = serve_metrics(consumer, port=0)
    try:
        with consumer:
            watchdog = threading.Timer(60, consumer.stop)  # the loop ends even if records never come
            watchdog.start()
            try:
                for batch in consumer:
                    per_shard[batch.shard_id] += len(batch)
                    bytes_read += sum(len(r.data) for r in batch.records)
                    batch.checkpoint()
                    checkpoints += 1
                    if sum(per_shard.values()) >= len(entries):
                        break
                live = scrape(server.url)
            finally:
                watchdog.cancel()
        closed = scrape(server.url)  # the server outlives the consumer: its final figures stay readable
    finally:
        server.close()

    labels = (("application", APP), ("stream", stream_name), ("worker", "prom-1"))
    assert sum(per_shard.values()) == len(entries) and len(per_shard) == 2  # both shards had records
    assert live[P + "records_total"] == {labels: len(entries)}
    assert live[P + "bytes_total"] == {labels: sum(len(data) for _key, data in entries)} == {labels: bytes_read}
    assert live[P + "checkpoints_total"] == {labels: checkpoints}
    assert live[P + "leases_taken_total"] == {labels: 2}
    assert live[P + "leases_held"] == {labels: 2}
    assert by_shard(live[P + "shard_records_total"]) == dict(per_shard)
    lags = by_shard(live[P + "shard_millis_behind_latest"])
    assert set(lags) == set(per_shard) and all(lag >= 0 for lag in lags.values())
    assert all(dict(key)["worker"] == "prom-1" for key in live[P + "shard_bytes_total"])

    assert closed[P + "leases_released_total"] == {labels: 2}
    assert closed[P + "leases_held"] == {labels: 0}
    assert closed[P + "leases_lost_total"] == {labels: 0}
    assert P + "shard_records_total" not in closed  # no lease held: no per-shard series


def test_process_figures_are_scraped_while_it_runs(kinesis: KinesisClient, stream_name: str, emulator_env) -> None:
    """process() with accepted, released-once and rejected records: the scrape matches the handler's own count."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    entries = [(f"key-{i % 4}", f"{i}".encode()) for i in range(30)]
    kinesis.put_records(stream_name, entries)
    rejected = {i for i in range(30) if i % 5 == 0}
    released = {i for i in range(30) if i % 7 == 1} - rejected
    lock = threading.Lock()
    done: set[int] = set()
    letters: list[object] = []

    def handle(record) -> None:  # a DeliveredRecord
        index = int(record.data)
        if index in rejected:
            with lock:
                done.add(index)
            raise Reject("a multiple of five")
        if index in released and record.delivery_count == 1:
            raise Release("once, to be delivered again")
        with lock:
            done.add(index)

    processing = ProcessingMetrics()
    consumer = BlockingConsumer(stream_name, application_name=APP_PROCESS, worker_id="prom-2", lease_timing=TIMING,
                                idle_interval_s=0.1)
    server = serve_metrics(consumer, port=0, processing=processing)
    scraped: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}

    def scrape_when_done() -> None:
        try:
            wait_for(lambda: processing.accepted + processing.rejected == len(entries) and
                     processing.dead_lettered == len(rejected), 60, "every record accepted or dead-lettered")
            scraped.update(scrape(server.url))
        finally:
            consumer.stop()

    watcher = threading.Thread(target=scrape_when_done)
    try:
        with consumer:
            watcher.start()
            consumer.process(handle, max_in_flight=4, ordering="key", dead_letter=letters.append,
                             metrics=processing)
    finally:
        watcher.join(timeout=70)
        server.close()

    labels = (("application", APP_PROCESS), ("stream", stream_name), ("worker", "prom-2"))
    figures = {name[len(P + "processing_"):]: values[labels] for name, values in scraped.items()
               if name.startswith(P + "processing_")}
    assert done == set(range(30)) and len(letters) == len(rejected)
    assert {k: figures[k] for k in ("accepted_total", "rejected_total", "dead_lettered_total", "released_total",
                                    "deliveries_total", "failed_total", "in_flight")} == {
        "accepted_total": 30 - len(rejected), "rejected_total": len(rejected),
        "dead_lettered_total": len(rejected), "released_total": len(released),
        "deliveries_total": 30 + len(released), "failed_total": 0, "in_flight": 0,
    }
    assert figures["redelivered_total"] >= len(released)
    assert scraped[P + "records_total"][labels] == 30  # the consumer's own figures on the same page
