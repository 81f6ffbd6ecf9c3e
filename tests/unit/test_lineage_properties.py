"""Property tests: ShardGraph against a brute-force reshard simulator."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import (
        MAX_HASH_KEY,
        ReshardSimulator,
        boundary_keys,
        histories,
        reference_open,
        reference_owner,
        reference_ready,
    )
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import (
        MAX_HASH_KEY,
        ReshardSimulator,
        boundary_keys,
        histories,
        reference_open,
        reference_owner,
        reference_ready,
    )

from lineage import LineageConflictError, LineageCycleError, ShardGraph, shard_sort_key

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def build(listings: list[dict]) -> ShardGraph:
    graph = ShardGraph()
    graph.update(listings)
    return graph


def drain_everything(graph: ShardGraph, listings: list[dict], rng: random.Random) -> set[str]:
    """Drain closed shards in random ready-sized bites, checking ready() at every step."""
    parents = {s["ShardId"]: [s.get("ParentShardId"), s.get("AdjacentParentShardId")] for s in listings}
    drained: set[str] = set()
    while True:
        ready = graph.ready(drained)
        assert ready == reference_ready(listings, drained)
        for sid in ready:
            assert sid not in drained
            assert all(p is None or p in drained or p not in graph for p in parents[sid]), sid
        closed = [sid for sid in ready if not graph.is_open(sid)]
        if not closed:
            return drained
        bite = rng.sample(closed, rng.randint(1, len(closed)))
        drained.update(bite)


# 1. tiling and open set ------------------------------------------------------

@SETTINGS
@given(histories())
def test_full_history_tiles_and_open_set_matches(sim: ReshardSimulator) -> None:
    graph = build(sim.listings())
    graph.validate()
    assert graph.open_shards() == sorted(sim.open_ids(), key=shard_sort_key)
    assert set(graph.open_shards()) == reference_open(sim.listings())
    for shard in sim.shards:
        assert graph.parents(shard.sid) == tuple(f"shardId-{p:012d}" for p in shard.parents)
        assert graph.is_open(shard.sid) == (shard.closed_at is None)
    assert graph.max_shard_id() == sim.shards[-1].sid


@SETTINGS
@given(histories())
def test_every_complete_snapshot_tiles(sim: ReshardSimulator) -> None:
    """Replaying history one complete listing at a time keeps a valid tiling after each."""
    graph = ShardGraph()
    for step in range(sim.step + 1):
        snapshot = sim.listings(step)
        changed = graph.update(snapshot)
        graph.validate()
        assert set(graph.open_shards()) == reference_open(snapshot)
        if step > 0:
            assert changed, "each reshard adds shards and closes some"


# 2. parent-first readiness ---------------------------------------------------

@SETTINGS
@given(histories(), st.randoms(use_true_random=False))
def test_draining_is_parent_first_and_never_stuck(sim: ReshardSimulator, rng: random.Random) -> None:
    listings = sim.listings()
    graph = build(listings)
    drained = drain_everything(graph, listings, rng)
    assert drained == set(sim.closed_ids()), "every closed shard must eventually be drained"
    assert graph.ready(drained) == sorted(sim.open_ids(), key=shard_sort_key)


# 3. owner ---------------------------------------------------------------------

@SETTINGS
@given(histories(), st.lists(st.integers(0, MAX_HASH_KEY), max_size=30))
def test_owner_agrees_with_linear_scan(sim: ReshardSimulator, keys: list[int]) -> None:
    listings = sim.listings()
    graph = build(listings)
    for key in sorted(boundary_keys(listings)) + keys:
        assert graph.owner(key) == reference_owner(listings, key), key


# 4. idempotence and order independence -------------------------------------

@SETTINGS
@given(histories(), st.randoms(use_true_random=False))
def test_pages_in_any_order_with_repeats_and_stale_views(sim: ReshardSimulator, rng: random.Random) -> None:
    expected = build(sim.listings())
    items = sim.listings() + sim.stale_listings()
    items += [rng.choice(items) for _ in range(rng.randint(0, len(items)))]
    rng.shuffle(items)
    graph = ShardGraph()
    while items:
        size = rng.randint(1, max(1, len(items) // 2))
        page, items = items[:size], items[size:]
        graph.update(page)
        if rng.random() < 0.3:
            assert graph.update(page) == (), "re-applying a page must change nothing"
    assert graph == expected
    assert graph.to_json() == expected.to_json()
    assert graph.open_shards() == expected.open_shards()
    assert graph.ready(set()) == expected.ready(set())


@SETTINGS
@given(histories(max_ops=20), st.randoms(use_true_random=False))
def test_incremental_growth_matches_batch_build(sim: ReshardSimulator, rng: random.Random) -> None:
    """Feeding only new shards per step (ExclusiveStartShardId style) equals one big update."""
    graph = ShardGraph()
    seen = 0
    for step in range(sim.step + 1):
        snapshot = sim.listings(step)
        graph.update(snapshot[seen:])
        seen = len(snapshot)
    assert graph.open_shards() == sorted(sim.open_ids(), key=shard_sort_key)
    # Ending sequence numbers arrive later, in a random order, and change only that.
    closed = [s for s in sim.listings() if "EndingSequenceNumber" in s["SequenceNumberRange"]]
    rng.shuffle(closed)
    for shard in closed:
        assert graph.update([shard]) == (shard["ShardId"],)
    assert graph == build(sim.listings())


# 5. JSON round trip -----------------------------------------------------------

@SETTINGS
@given(histories())
def test_json_round_trip(sim: ReshardSimulator) -> None:
    graph = build(sim.listings())
    text = graph.to_json()
    again = ShardGraph.from_json(text)
    assert again == graph
    assert again.to_json() == text
    assert again.open_shards() == graph.open_shards()
    assert again.ready(set()) == graph.ready(set())
    assert again.max_shard_id() == graph.max_shard_id()


# 6. trimming ----------------------------------------------------------------

@SETTINGS
@given(histories(), st.data())
def test_trimming_oldest_closed_shards(sim: ReshardSimulator, data: st.DataObject) -> None:
    closed = sorted(sim.closed_ids(), key=shard_sort_key)
    trimmed = set(closed[: data.draw(st.integers(0, len(closed)), label="trim")])
    survivors = [s for s in sim.listings() if s["ShardId"] not in trimmed]
    graph = build(survivors)
    graph.validate()
    assert graph.open_shards() == sorted(sim.open_ids(), key=shard_sort_key)
    orphans = [
        s["ShardId"]
        for s in survivors
        if s.get("ParentShardId") and all(
            p in trimmed for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")) if p
        )
    ]
    ready = graph.ready(set())
    assert set(orphans) <= set(ready)
    assert ready == reference_ready(survivors, set())
    rng = data.draw(st.randoms(use_true_random=False), label="rng")
    drained = drain_everything(graph, survivors, rng)
    assert drained == set(sim.closed_ids()) - trimmed


# 7. atomicity -----------------------------------------------------------------

@SETTINGS
@given(histories(), st.data())
def test_rejected_page_leaves_graph_unchanged(sim: ReshardSimulator, data: st.DataObject) -> None:
    graph = build(sim.listings())
    before = graph.to_json()
    victim = dict(data.draw(st.sampled_from(sim.listings()), label="victim"))
    victim["SequenceNumberRange"] = {"StartingSequenceNumber": "1"}
    extra = {**victim, "ShardId": f"shardId-{len(sim.shards) + 5:012d}"}
    with pytest.raises(LineageConflictError, match=victim["ShardId"]):
        graph.update([extra, victim])
    assert graph.to_json() == before
    assert extra["ShardId"] not in graph
    assert graph.max_shard_id() == sim.shards[-1].sid
    graph.validate()


@SETTINGS
@given(histories(max_ops=15), st.data())
def test_injected_cycle_is_always_detected(sim: ReshardSimulator, data: st.DataObject) -> None:
    """Re-parent a new copy of an old shard under one of its descendants: a cycle, never stored."""
    graph = build(sim.listings())
    candidates = [s.sid for s in sim.shards if graph.descendants(s.sid)]
    if not candidates:
        return
    ancestor = data.draw(st.sampled_from(candidates), label="ancestor")
    descendant = data.draw(st.sampled_from(graph.descendants(ancestor)), label="descendant")
    fresh = ShardGraph()
    listings = [s for s in sim.listings() if s["ShardId"] != ancestor]
    fresh.update(listings)
    before = fresh.to_json()
    bad = {**next(s for s in sim.listings() if s["ShardId"] == ancestor), "ParentShardId": descendant}
    bad.pop("AdjacentParentShardId", None)
    with pytest.raises(LineageCycleError) as info:
        fresh.update([bad])
    assert ancestor in str(info.value) and descendant in str(info.value)
    assert fresh.to_json() == before
