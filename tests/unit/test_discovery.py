"""ShardDiscovery: full then incremental listings, ShardFilter fallback, inconsistent listings."""

from __future__ import annotations

import pytest
from fake_kinesis import FakeKinesis

from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import LineageListingError
from kinesis_src.positions import Position

TOP = 2**128 - 1


def shard(n: int, lo: int, hi: int, parent: int | None = None, closed: bool = False) -> dict:
    out = {
        "ShardId": f"shardId-{n:012d}",
        "HashKeyRange": {"StartingHashKey": str(lo), "EndingHashKey": str(hi)},
        "SequenceNumberRange": {"StartingSequenceNumber": str(100 * (n + 1))},
    }
    if parent is not None:
        out["ParentShardId"] = f"shardId-{parent:012d}"
    if closed:
        out["SequenceNumberRange"]["EndingSequenceNumber"] = str(100 * (n + 1) + 50)
    return out


def fake_stream(shards: list[dict], *, shard_filter: str = "supported", ignores_start: bool = False) -> FakeKinesis:
    """Stream "s" listing ``shards``; ``shard_filter="rejected"`` is an endpoint that lacks ShardFilter."""
    fake = FakeKinesis()
    fake.create_stream("s", listing=shards)
    fake.shard_filter, fake.ignores_exclusive_start = shard_filter, ignores_start
    return fake


def listed(fake: FakeKinesis, arg: str) -> list:
    return [c.args[arg] for c in fake.calls_to("list_shards")]


def test_full_then_incremental() -> None:
    fake = fake_stream([shard(0, 0, TOP)])
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    assert discovery.refresh() == ("shardId-000000000000",)
    fake.split_shard("s", "shardId-000000000000", 100)  # children 1 (0-99) and 2 (100-TOP)
    assert discovery.refresh() == ("shardId-000000000000", "shardId-000000000001", "shardId-000000000002")
    assert listed(fake, "exclusive_start_shard_id")[-1] == "shardId-000000000000"
    assert not discovery.graph.is_open("shardId-000000000000")


def test_rejected_shard_filter_falls_back_and_is_remembered() -> None:
    fake = fake_stream([shard(0, 0, TOP)], shard_filter="rejected")
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    assert discovery.refresh(Position.latest()) == ("shardId-000000000000",)
    assert listed(fake, "shard_filter") == [{"Type": "AT_LATEST"}, None]
    assert discovery.filter_supported is False


def test_ignored_exclusive_start_is_harmless() -> None:
    fake = fake_stream([shard(0, 0, TOP)], ignores_start=True)
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    discovery.refresh()
    assert discovery.refresh() == ()
    assert len(discovery.graph) == 1


def test_at_timestamp_start_lists_from_that_time() -> None:
    fake = fake_stream([shard(0, 0, TOP)])
    ShardDiscovery(fake, "s").refresh(Position.at_timestamp("2026-01-01T00:00:00Z"))  # type: ignore[arg-type]
    assert listed(fake, "shard_filter")[0]["Type"] == "FROM_TIMESTAMP"


def test_a_listing_with_a_gap_names_the_stream() -> None:
    fake = fake_stream([shard(0, 0, 10), shard(1, 20, TOP)])
    with pytest.raises(LineageListingError, match="stream 's'"):
        ShardDiscovery(fake, "s").refresh()  # type: ignore[arg-type]


def test_conflicting_parents_between_listings_name_the_stream() -> None:
    fake = fake_stream([shard(0, 0, TOP)])
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    discovery.refresh()
    fake.set_listing("s", [shard(0, 0, TOP), shard(1, 0, TOP, parent=0)])
    discovery.refresh()
    fake.set_listing("s", [shard(1, 0, TOP, parent=7)])
    fake.ignores_exclusive_start = True
    with pytest.raises(LineageListingError, match="shardId-000000000001"):
        discovery.refresh()
