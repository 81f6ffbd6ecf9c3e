"""ShardDiscovery: full then incremental listings, ShardFilter fallback, inconsistent listings."""

from __future__ import annotations

import pytest

from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import InvalidRequestError, LineageListingError
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


class FakeKinesis:
    """Lists a fixed set of shards; can reject ShardFilter like endpoints that lack it."""

    def __init__(self, shards: list[dict], rejects_filter: bool = False, ignores_start: bool = False) -> None:
        self.shards = shards
        self.rejects_filter = rejects_filter
        self.ignores_start = ignores_start
        self.calls: list[dict] = []

    def list_shards(self, stream: str, exclusive_start_shard_id=None, shard_filter=None, page_size: int = 1000):
        self.calls.append({"start": exclusive_start_shard_id, "filter": shard_filter})
        if shard_filter and self.rejects_filter:
            raise InvalidRequestError("ListShards: InvalidArgumentException: ShardFilter not supported")
        if exclusive_start_shard_id and not self.ignores_start:
            return [s for s in self.shards if s["ShardId"] > exclusive_start_shard_id]
        return list(self.shards)


def test_full_then_incremental() -> None:
    fake = FakeKinesis([shard(0, 0, TOP)])
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    assert discovery.refresh() == ("shardId-000000000000",)
    fake.shards += [shard(1, 0, 99, parent=0), shard(2, 100, TOP, parent=0)]
    assert discovery.refresh() == ("shardId-000000000000", "shardId-000000000001", "shardId-000000000002")
    assert fake.calls[-1]["start"] == "shardId-000000000000"
    assert not discovery.graph.is_open("shardId-000000000000")


def test_rejected_shard_filter_falls_back_and_is_remembered() -> None:
    fake = FakeKinesis([shard(0, 0, TOP)], rejects_filter=True)
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    assert discovery.refresh(Position.latest()) == ("shardId-000000000000",)
    assert [c["filter"] for c in fake.calls] == [{"Type": "AT_LATEST"}, None]
    assert discovery.filter_supported is False


def test_ignored_exclusive_start_is_harmless() -> None:
    fake = FakeKinesis([shard(0, 0, TOP)], ignores_start=True)
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    discovery.refresh()
    assert discovery.refresh() == ()
    assert len(discovery.graph) == 1


def test_at_timestamp_start_lists_from_that_time() -> None:
    fake = FakeKinesis([shard(0, 0, TOP)])
    ShardDiscovery(fake, "s").refresh(Position.at_timestamp("2026-01-01T00:00:00Z"))  # type: ignore[arg-type]
    assert fake.calls[0]["filter"]["Type"] == "FROM_TIMESTAMP"


def test_a_listing_with_a_gap_names_the_stream() -> None:
    fake = FakeKinesis([shard(0, 0, 10), shard(1, 20, TOP)])
    with pytest.raises(LineageListingError, match="stream 's'"):
        ShardDiscovery(fake, "s").refresh()  # type: ignore[arg-type]


def test_conflicting_parents_between_listings_name_the_stream() -> None:
    fake = FakeKinesis([shard(0, 0, TOP)])
    discovery = ShardDiscovery(fake, "s")  # type: ignore[arg-type]
    discovery.refresh()
    fake.shards = [shard(0, 0, TOP), shard(1, 0, TOP, parent=0)]
    discovery.refresh()
    fake.shards = [shard(1, 0, TOP, parent=7)]
    fake.ignores_start = True
    with pytest.raises(LineageListingError, match="shardId-000000000001"):
        discovery.refresh()
