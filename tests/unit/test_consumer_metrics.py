"""A consumer's metrics over several streams: per-stream counters, totals, and shard keys that cannot collide."""

from __future__ import annotations

from dataclasses import asdict

from kinesis_src.consumer.metrics import ConsumerMetrics, ShardMetrics, StreamMetrics


def test_each_stream_counts_its_own_and_the_totals_add_up_gauges_included() -> None:
    total = ConsumerMetrics("w")
    orders, payments = StreamMetrics(total, "orders", True), StreamMetrics(total, "payments", True)
    orders.records += 5
    payments.records += 7
    orders.count_aggregates(2, 1)
    orders.shards_held_past_end = 2  # a gauge, set per stream
    payments.shards_held_past_end = 1
    orders.shards_held_past_end = 0
    assert (total.records, total.aggregates, total.aggregates_malformed, total.shards_held_past_end) == (12, 2, 1, 1)
    assert (total.streams["orders"].records, total.streams["payments"].records) == (5, 7)
    assert total.streams["payments"].shards_held_past_end == 1


def test_shards_of_the_same_id_in_two_streams_are_kept_apart_and_removed_alone() -> None:
    total = ConsumerMetrics("w")
    orders, payments = StreamMetrics(total, "orders", True), StreamMetrics(total, "payments", True)
    orders.shards["shardId-0"] = ShardMetrics("shardId-0")
    payments.shards["shardId-0"] = ShardMetrics("shardId-0")
    assert sorted(total.shards) == ["orders/shardId-0", "payments/shardId-0"] and total.leases_held == 2
    assert total.shards["payments/shardId-0"].stream == "payments"
    assert orders.shards.get("shardId-0") is total.shards["orders/shardId-0"]
    orders.shards.pop("shardId-0")
    assert list(total.shards) == ["payments/shardId-0"] and len(orders.shards) == 0


def test_one_stream_keeps_plain_shard_ids_and_a_snapshot_is_a_copy() -> None:
    total = ConsumerMetrics("w")
    only = StreamMetrics(total, "orders", False)
    only.shards["shardId-0"] = ShardMetrics("shardId-0")
    only.records += 3
    copy = total.snapshot()
    only.records += 1
    assert list(copy.shards) == ["shardId-0"] and copy.records == 3 and copy.streams["orders"].records == 3
    assert asdict(copy)["streams"]["orders"]["records"] == 3
