"""The read path against real kinesis-mock: lineage order through live splits and merges."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from waiting import wait_for  # tests/waiting.py

from kinesis_src import KinesisClient, Position, drain_stream
from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import (
    ShardNotFoundError,
    StreamNotFoundError,
)
from kinesis_src.retrieval.polling import ShardReader, StopReason
from kinesis_src.workload import KeyedProducer, check_order

pytestmark = pytest.mark.integration



def make_stream(kinesis: KinesisClient, name: str, shards: int) -> None:
    kinesis.create_stream(name, shards)
    kinesis.wait_active(name)


def hash_range(shard: dict) -> tuple[int, int]:
    r = shard["HashKeyRange"]
    return int(r["StartingHashKey"]), int(r["EndingHashKey"])


def split_and_merge_while_producing(kinesis: KinesisClient, stream: str, producer: KeyedProducer) -> None:
    """Split shard 0, merge its upper child into shard 1, then split the merged shard; producer runs throughout."""
    producer.put_rounds(3)
    worker = threading.Thread(target=producer.run_until_stopped, args=(1000,), daemon=True)
    worker.start()

    def rounds_pass(n: int) -> None:
        target = producer.acknowledged + n * producer.keys
        wait_for(lambda: producer.acknowledged >= target or not worker.is_alive(), what="producer rounds")

    try:
        rounds_pass(2)
        lo, hi = hash_range(kinesis.list_shards(stream)[0])
        kinesis.split_shard(stream, "shardId-000000000000", (lo + hi + 1) // 2)
        kinesis.wait_active(stream)
        rounds_pass(2)
        kinesis.merge_shards(stream, "shardId-000000000003", "shardId-000000000001")
        kinesis.wait_active(stream)
        rounds_pass(2)
        merged = {s["ShardId"]: s for s in kinesis.list_shards(stream)}["shardId-000000000004"]
        lo, hi = hash_range(merged)
        kinesis.split_shard(stream, "shardId-000000000004", lo + (hi - lo) // 3)
        kinesis.wait_active(stream)
        rounds_pass(2)
    finally:
        producer.stop()
        worker.join(timeout=60)
    assert not worker.is_alive()
    producer.put_rounds(2)


def test_drain_in_lineage_order_through_split_and_merge(kinesis: KinesisClient, stream_name: str) -> None:
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=40)
    split_and_merge_while_producing(kinesis, stream_name, producer)

    order: list[str] = []
    records = []
    for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0):
        records.extend(chunk.records())
        if chunk.shard_id not in order:
            order.append(chunk.shard_id)

    report = check_order(records, producer.expected())
    assert report.ok, report.summary()
    assert report.records == producer.acknowledged
    # Every shard of the lineage was read, and each after its parents.
    graph = ShardDiscovery(kinesis, stream_name)
    graph.refresh()
    assert sorted(order) == graph.graph.shard_ids()
    for shard in order:
        for parent in graph.graph.parents(shard):
            assert order.index(parent) < order.index(shard), f"{shard} read before its parent {parent}"
    # Keys really moved between shards: otherwise the order check proves nothing about resharding.
    assert len([s for s, n in report.shards.items() if n]) >= 5


def test_the_order_check_catches_children_read_before_parents(kinesis: KinesisClient, stream_name: str) -> None:
    """Negative control: the same data read newest shard first must fail the check."""
    make_stream(kinesis, stream_name, 1)
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    producer.put_rounds(3)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)
    producer.put_rounds(3)
    records = []
    for shard_id in ["shardId-000000000002", "shardId-000000000001", "shardId-000000000000"]:
        reader = ShardReader(kinesis, stream_name, shard_id, Position.trim_horizon(), fetch_interval_s=0)
        records.extend(reader.read(max_records=10_000, until_caught_up=True).records())
    report = check_order(records, producer.expected())
    assert not report.ok and len(report.out_of_order) == 10


def test_closed_shard_ends_with_child_shards(kinesis: KinesisClient, stream_name: str) -> None:
    make_stream(kinesis, stream_name, 1)
    KeyedProducer(kinesis, stream_name, keys=5).put_rounds(2)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)
    reader = ShardReader(kinesis, stream_name, "shardId-000000000000", Position.trim_horizon(), fetch_interval_s=0)
    read = reader.read(max_records=1000)
    assert read.stop_reason is StopReason.SHARD_END
    assert read.record_count == 10
    assert sorted(c.shard_id for c in read.child_shards) == ["shardId-000000000001", "shardId-000000000002"]


def test_incremental_discovery_lists_only_new_shards_and_closes_parents(kinesis: KinesisClient, stream_name: str) -> None:
    make_stream(kinesis, stream_name, 2)
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


def test_update_shard_count_is_followed(kinesis: KinesisClient, stream_name: str) -> None:
    make_stream(kinesis, stream_name, 2)
    producer = KeyedProducer(kinesis, stream_name, keys=20)
    producer.put_rounds(2)
    kinesis.update_shard_count(stream_name, 4)
    kinesis.wait_active(stream_name)
    producer.put_rounds(2)
    records = [r for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0) for r in chunk.records()]
    report = check_order(records, producer.expected())
    assert report.ok, report.summary()
    discovery = ShardDiscovery(kinesis, stream_name)
    discovery.refresh()
    assert len(discovery.graph.open_shards()) == 4


def test_start_positions_latest_and_at_timestamp(kinesis: KinesisClient, stream_name: str) -> None:
    make_stream(kinesis, stream_name, 1)
    producer = KeyedProducer(kinesis, stream_name, keys=5)
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


def test_bad_input_names_the_stream_shard_and_endpoint(kinesis: KinesisClient, stream_name: str) -> None:
    with pytest.raises(StreamNotFoundError) as info:
        list(drain_stream(kinesis, "no-such-stream"))
    assert "'no-such-stream'" in str(info.value) and kinesis.endpoint in str(info.value)
    make_stream(kinesis, stream_name, 1)
    reader = ShardReader(kinesis, stream_name, "shardId-000000000042", Position.trim_horizon())
    with pytest.raises(ShardNotFoundError, match="shardId-000000000042"):
        reader.read(max_records=1)
