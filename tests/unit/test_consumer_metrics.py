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


def test_two_key_range_units_of_one_shard_are_kept_apart_and_removed_alone() -> None:
    """A worker without a range may read two units of one shard (#11): one entry each, labelled."""
    total = ConsumerMetrics("w")
    stream = StreamMetrics(total, "orders", False)
    low, high = stream.for_unit("0-99"), stream.for_unit("100-199")
    low.shards["shardId-0"] = ShardMetrics("shardId-0", records=1)
    high.shards["shardId-0"] = ShardMetrics("shardId-0", records=2)
    assert total.leases_held == 2 and len(total.streams["orders"].shards) == 2
    assert (low.shards["shardId-0"].records, high.shards["shardId-0"].records) == (1, 2)
    assert sorted(s.key_range for s in total.shards.values()) == ["0-99", "100-199"]
    assert list(low.shards) == ["shardId-0"] and len(high.shards) == 1
    high.shards.pop("shardId-0")
    assert [s.key_range for s in total.shards.values()] == ["0-99"] and "shardId-0" not in high.shards
    low.records += 4  # counters are the stream's, whichever unit counts
    assert (total.records, stream.records) == (4, 4)
