"""A running consumer's Prometheus endpoint, scraped over HTTP, on kinesis-mock + DynamoDB Local.

The consumer reads a two-shard stream of known records; the scrape must show
exactly what was read (records and bytes, overall and per shard), the two
leases taken, a lag figure per shard, the checkpoints written, and after a
graceful close the two leases released and none held.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_src import BlockingConsumer, KinesisClient, LeaseTiming
from kinesis_src.consumer.prometheus import serve_metrics

pytestmark = pytest.mark.integration

APP = "prometheus-tests"
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
