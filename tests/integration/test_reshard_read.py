"""The read path against real kinesis-mock: lineage order through live splits and merges.

Streams, reshards and keyed data come from our testing kit's fixtures
(``kinesis_stream_factory``, ``kinesis_resharder``, ``kinesis_keyed_producer``,
:mod:`kinesis_src.testing`), so the kit users get is what these tests run on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest
from waiting import wait_for  # tests/waiting.py

from kinesis_src import Position, drain_stream
from kinesis_src.aws import KinesisClient
from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import (
    ShardNotFoundError,
    StreamNotFoundError,
)
from kinesis_src.retrieval.polling import ShardReader, StopReason
from kinesis_src.testing import DeliveryError, KeyedProducer, Resharder, StreamFactory, check_order, verify_delivery

pytestmark = pytest.mark.integration

Producers = Callable[..., KeyedProducer]


def split_and_merge_while_producing(resharder: Resharder, stream: str, producer: KeyedProducer) -> None:
    """Split shard 0, merge its upper child into shard 1, then split the merged shard; producer runs throughout."""
    producer.put_rounds(3)
    worker = threading.Thread(target=producer.run_until_stopped, args=(1000,), daemon=True)
    worker.start()

    def rounds_pass(n: int) -> None:
        target = producer.acknowledged + n * producer.keys
        wait_for(lambda: producer.acknowledged >= target or not worker.is_alive(), what="producer rounds")

    try:
        rounds_pass(2)
        split = resharder.split(stream, "shardId-000000000000")  # at the middle: children 2 (lower), 3 (upper)
        assert split.children == ("shardId-000000000002", "shardId-000000000003")
        rounds_pass(2)
        merge = resharder.merge(stream, "shardId-000000000003", "shardId-000000000001")
        assert merge.children == ("shardId-000000000004",)
        rounds_pass(2)
        merged = next(s for s in resharder.open_shards(stream) if s.shard_id == "shardId-000000000004")
        resharder.split(stream, merged.shard_id, merged.start + (merged.end - merged.start) // 3)
        rounds_pass(2)
    finally:
        producer.stop()
        worker.join(timeout=60)
    assert not worker.is_alive()
    producer.put_rounds(2)


def test_drain_in_lineage_order_through_split_and_merge(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    kinesis_keyed_producer: Producers,
) -> None:
    stream_name = kinesis_stream_factory(shards=2)
    producer = kinesis_keyed_producer(stream_name, keys=40)
    split_and_merge_while_producing(kinesis_resharder, stream_name, producer)

    order: list[str] = []
    records = []
    for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0):
        records.extend(chunk.records())
        if chunk.shard_id not in order:
            order.append(chunk.shard_id)

    delivery = verify_delivery(records, producer)  # exactly once, per-key order (raises with its report)
    assert delivery.delivered == producer.acknowledged
    report = check_order(records, producer.expected())  # the workload's own check agrees, and counts per shard
    assert report.ok, report.summary()
    # Every shard of the lineage was read, and each after its parents.
    graph = ShardDiscovery(kinesis, stream_name)
    graph.refresh()
    assert sorted(order) == graph.graph.shard_ids()
    for shard in order:
        for parent in graph.graph.parents(shard):
            assert order.index(parent) < order.index(shard), f"{shard} read before its parent {parent}"
    # Keys really moved between shards: otherwise the order check proves nothing about resharding.
    assert len([s for s, n in report.shards.items() if n]) >= 5


def test_the_order_check_catches_children_read_before_parents(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    kinesis_keyed_producer: Producers,
) -> None:
    """Negative control: the same data read newest shard first must fail both checks."""
    stream_name = kinesis_stream_factory(shards=1)
    producer = kinesis_keyed_producer(stream_name, keys=10)
    producer.put_rounds(3)
    kinesis_resharder.split(stream_name, "shardId-000000000000", at=2**127)
    producer.put_rounds(3)
    records = []
    for shard_id in ["shardId-000000000002", "shardId-000000000001", "shardId-000000000000"]:
        reader = ShardReader(kinesis, stream_name, shard_id, Position.trim_horizon(), fetch_interval_s=0)
        records.extend(reader.read(max_records=10_000, until_caught_up=True).records())
    report = check_order(records, producer.expected())
    assert not report.ok and len(report.out_of_order) == 10
    with pytest.raises(DeliveryError) as caught:
        verify_delivery(records, producer)
    # the kit names every late counter: the parent's 3 rounds of each of the 10 keys came after the child's
    assert len(caught.value.report.out_of_order) == 30 and not caught.value.report.missing


def test_closed_shard_ends_with_child_shards(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    kinesis_keyed_producer: Producers,
) -> None:
    stream_name = kinesis_stream_factory(shards=1)
    kinesis_keyed_producer(stream_name, keys=5).put_rounds(2)
    kinesis_resharder.split(stream_name, "shardId-000000000000", at=2**127)
    reader = ShardReader(kinesis, stream_name, "shardId-000000000000", Position.trim_horizon(), fetch_interval_s=0)
    read = reader.read(max_records=1000)
    assert read.stop_reason is StopReason.SHARD_END
    assert read.record_count == 10
    assert sorted(c.shard_id for c in read.child_shards) == ["shardId-000000000001", "shardId-000000000002"]


def test_incremental_discovery_lists_only_new_shards_and_closes_parents(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory
) -> None:
    stream_name = kinesis_stream_factory(shards=2)
    listed: list[list[str]] = []
    real_list = kinesis.list_shards

    def spy(*args, **kwargs):
        shards = real_list(*args, **kwargs)
        listed.append([s["ShardId"] for s in shards])
        return shards

    kinesis.list_shards = spy  # type: ignore[method-assign]
    discovery = ShardDiscovery(kinesis, stream_name)
    assert discovery.refresh() == ("shardId-000000000000", "shardId-000000000001")
    kinesis.split_shard(stream_name, "shardId-000000000001", 3 * 2**126)
    kinesis.wait_active(stream_name)
    # The parent changed (it is closed now) and the two children are new.
    assert discovery.refresh() == ("shardId-000000000001", "shardId-000000000002", "shardId-000000000003")
    assert listed[-1] == ["shardId-000000000002", "shardId-000000000003"]  # ExclusiveStartShardId honoured
    assert not discovery.graph.is_open("shardId-000000000001")
    discovery.graph.validate()
    assert discovery.refresh() == ()
    assert listed[-1] == []


def test_update_shard_count_is_followed(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_resharder: Resharder,
    kinesis_keyed_producer: Producers,
) -> None:
    stream_name = kinesis_stream_factory(shards=2)
    producer = kinesis_keyed_producer(stream_name, keys=20)
    producer.put_rounds(2)
    kinesis_resharder.scale_to(stream_name, 4, method="update_shard_count")
    producer.put_rounds(2)
    records = [r for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0) for r in chunk.records()]
    verify_delivery(records, producer)
    discovery = ShardDiscovery(kinesis, stream_name)
    discovery.refresh()
    assert len(discovery.graph.open_shards()) == 4


def test_start_positions_latest_and_at_timestamp(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory, kinesis_keyed_producer: Producers
) -> None:
    stream_name = kinesis_stream_factory(shards=1)
    producer = kinesis_keyed_producer(stream_name, keys=5)
    producer.put_rounds(2)
    shard = "shardId-000000000000"
    latest = ShardReader(kinesis, stream_name, shard, Position.latest(), fetch_interval_s=0)
    assert latest.read(until_caught_up=True).record_count == 0
    cut = datetime.now(timezone.utc)
    # Arrival timestamps have millisecond resolution: the next round must arrive strictly after `cut`.
    wait_for(lambda: datetime.now(timezone.utc) > cut + timedelta(milliseconds=2), what="clock to pass the cut")
    producer.put_rounds(1)
    after_latest = latest.read(until_caught_up=True)
    assert after_latest.record_count == 5
    at_ts = ShardReader(kinesis, stream_name, shard, Position.at_timestamp(cut), fetch_interval_s=0)
    got = [r.data for r in at_ts.read(until_caught_up=True).records()]
    assert got == [r.data for r in after_latest.records()]
    resumed = ShardReader(kinesis, stream_name, shard, Position.after_sequence(after_latest.pages[0].sequence_numbers[1]), fetch_interval_s=0)
    assert resumed.read(until_caught_up=True).record_count == 3


def test_bad_input_names_the_stream_shard_and_endpoint(
    kinesis: KinesisClient, kinesis_stream_factory: StreamFactory
) -> None:
    with pytest.raises(StreamNotFoundError) as info:
        list(drain_stream(kinesis, "no-such-stream"))
    assert "'no-such-stream'" in str(info.value) and kinesis.endpoint in str(info.value)
    stream_name = kinesis_stream_factory(shards=1)
    reader = ShardReader(kinesis, stream_name, "shardId-000000000042", Position.trim_horizon())
    with pytest.raises(ShardNotFoundError, match="shardId-000000000042"):
        reader.read(max_records=1)
