"""EFO event-stream failures and resubscribes in the Consumer's metrics and its Prometheus exposition (#23).

A failed event stream costs its shard a resubscribe, silently to the
application; an operator sees it only in these counters: failures by the
code AWS sent (or the error class when the stream broke off without one),
and subscriptions a holding opened after its first. Built as
``test_consumer_efo`` builds its consumers, on the shared fake.
"""

from __future__ import annotations

import pytest
from consumer_harness import make_consumer, make_lease, only, run, take
from fake_kinesis import FakeKinesis, event_stream_error, shard_id
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_src.consumer import Consumer
from kinesis_src.consumer.prometheus import ConsumerCollector
from kinesis_src.retrieval import async_fanout
from kinesis_src.retrieval.registration import FanOutTarget

STREAM, SHARD = "orders", shard_id(0)
KNOWN, UNKNOWN = "InternalFailureException", "SomeCodeNobodyKnowsException"


def failing_stream() -> tuple[FakeKinesis, list[str]]:
    """Six records, two an event; the event stream fails after the first event of each of the first two
    subscriptions: once with a code kinesis-src maps (transient), once with one it does not know."""
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    seqs = [fake.put_record(STREAM, f"k{i}", b"r%d" % i, shard_id=SHARD)["SequenceNumber"] for i in range(6)]
    fake.records_per_event = 2
    fake.inject("subscribe_event", event_stream_error(KNOWN), shard_id=SHARD, calls=(2,))
    fake.inject("subscribe_event", event_stream_error(UNKNOWN), shard_id=SHARD, calls=(4,))
    return fake, seqs


def efo_consumer(fake: FakeKinesis) -> Consumer:
    consumer, _ = make_consumer(fake, consumer_mode="efo")
    stream_arn = fake.stream(STREAM).arn
    only(consumer).fan_out = FanOutTarget(fake.register_consumer(stream_arn, "app").arn, stream_arn, "app")
    return consumer


def scraped(consumer: Consumer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(consumer))
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples}


def test_event_stream_failures_by_code_and_resubscribes_are_counted_and_exported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(async_fanout, "BROKEN_PAUSE_S", 0.0)

    async def scenario() -> Consumer:
        fake, seqs = failing_stream()
        consumer = efo_consumer(fake)
        take(only(consumer), make_lease(SHARD))
        seen: list[str] = []
        while len(seen) < len(seqs):
            batch = await consumer.__anext__()
            seen.extend(r.sequence_number for r in batch.records)
            await batch.checkpoint()
        assert seen == seqs
        assert fake.count("subscribe", SHARD) == 3
        consumer.stop()
        return consumer

    consumer = run(scenario)
    failures = {KNOWN: 1, UNKNOWN: 1}
    snapshot = consumer.metrics.snapshot()
    assert (snapshot.efo_event_stream_failures, snapshot.efo_resubscribes) == (failures, 2)
    assert snapshot.streams[STREAM].efo_event_stream_failures == failures  # the stream's own, too
    snapshot.efo_event_stream_failures[KNOWN] = 99  # a snapshot is the caller's copy
    assert consumer.metrics.efo_event_stream_failures == failures
    assert "2 EFO resubscribes" in consumer.metrics.summary()

    samples = scraped(consumer)
    labels = {("application", "app"), ("stream", STREAM), ("worker", "me")}
    name = "kinesis_src_consumer_efo_event_stream_failures_total"
    assert {code: samples[(name, frozenset(labels | {("code", code)}))] for code in failures} == failures
    assert samples[("kinesis_src_consumer_efo_resubscribes_total", frozenset(labels))] == 2


def test_a_polling_consumer_exports_no_event_stream_failures_and_zero_resubscribes() -> None:
    async def scenario() -> Consumer:
        consumer, _ = make_consumer(FakeKinesis())
        return consumer

    samples = scraped(run(scenario))
    assert not [key for key in samples if key[0] == "kinesis_src_consumer_efo_event_stream_failures_total"]
    labels = frozenset({("application", "app"), ("stream", STREAM), ("worker", "me")})
    assert samples[("kinesis_src_consumer_efo_resubscribes_total", labels)] == 0
