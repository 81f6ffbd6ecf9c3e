"""Throughput estimates: the holder's meter, and the balancer's weights (pure, no I/O)."""

from __future__ import annotations

import pytest

from kinesis_src.leases.model import Checkpoint, Lease, Throughput
from kinesis_src.leases.throughput import (
    BASE_WEIGHT,
    MIN_SPAN_S,
    RateMeter,
    lease_weights,
    weight,
)
from lineage import MAX_HASH_KEY, HashRange

FULL = HashRange(0, MAX_HASH_KEY)
NOW_MS = 1_700_000_000_000


def lease(i: int, throughput: Throughput | None = None) -> Lease:
    return Lease(f"shardId-{i:012d}", Checkpoint.trim_horizon(), FULL, throughput=throughput)


def test_a_constant_flow_reads_right_from_the_first_seconds_and_decays_when_it_stops() -> None:
    meter = RateMeter(started=0.0)
    for t in range(1, 21):  # 100 records of 1 KB per second for 20 s
        meter.add(100, 100_000, float(t))
    assert meter.rate(MIN_SPAN_S - 1, NOW_MS) is None  # too young to say
    estimate = meter.rate(20.0, NOW_MS)
    assert estimate is not None and estimate.records_per_s == pytest.approx(100, rel=0.05)
    assert estimate.bytes_per_s == pytest.approx(100_000, rel=0.05) and estimate.measured_ms == NOW_MS
    quiet = meter.rate(20.0 + 300, NOW_MS)  # five minutes without a record
    assert quiet is not None and quiet.records_per_s < 1


def test_weights_are_a_share_of_a_shards_limit_and_unknown_ones_weigh_the_mean() -> None:
    assert weight(Throughput(1000, 0, 0)) == pytest.approx(1 + BASE_WEIGHT)
    assert weight(Throughput(10, 1_000_000, 0)) == pytest.approx(1 + BASE_WEIGHT)  # bytes bound it
    hot, cold = Throughput(500, 50_000, NOW_MS), Throughput(50, 5_000, NOW_MS)
    stale = Throughput(5000, 0, NOW_MS - 3_600_000)  # its holder stopped checkpointing an hour ago
    weights = lease_weights([lease(0, hot), lease(1, cold), lease(2), lease(3, stale)], NOW_MS)
    assert weights is not None
    mean = (weight(hot) + weight(cold)) / 2
    assert weights == pytest.approx({lease(0).shard_id: weight(hot), lease(1).shard_id: weight(cold),
                                     lease(2).shard_id: mean, lease(3).shard_id: mean})
    assert lease_weights([lease(0), lease(1, stale)], NOW_MS) is None  # no current estimate: count leases
