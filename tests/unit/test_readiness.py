"""The one readiness rule (lineage.readiness.parents_done), and its two askers agreeing on it: the shard
graph (drained / listed) and the lease assignment (SHARD_END / has a lease)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_src.leases.assignment import is_assignable, plan_assignment
from kinesis_src.leases.model import Checkpoint, Lease
from lineage import MAX_HASH_KEY, HashRange, ShardGraph
from lineage.readiness import parents_done

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing, shard_id
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing, shard_id

FULL = HashRange(0, MAX_HASH_KEY)


def test_a_parent_is_done_when_drained_or_unknown() -> None:
    known, done = {"p", "q"}, {"p"}
    assert parents_done((), known, done)
    assert parents_done(("p",), known, done)
    assert parents_done(("trimmed",), known, done)  # never to be seen again: it cannot hold the child back
    assert not parents_done(("q",), known, done)
    assert not parents_done(("p", "q"), known, done)  # a merge waits for both parents
    assert parents_done(("p", "trimmed"), known, done)


@st.composite
def lineages(draw: st.DrawFn) -> tuple[dict[int, tuple[int, ...]], set[int], set[int]]:
    """Shards with 0-2 older parents; which are drained; which are trimmed (neither listed nor leased)."""
    count = draw(st.integers(1, 12))
    parents = {i: tuple(sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=2))))) if i else ()
               for i in range(count)}
    drained = draw(st.sets(st.integers(0, count - 1)))
    trimmed = draw(st.sets(st.integers(0, count - 1), max_size=3))
    return parents, drained, trimmed


def _lease(i: int, parents: tuple[int, ...], ended: bool) -> Lease:
    checkpoint = Checkpoint.shard_end() if ended else Checkpoint.trim_horizon()
    return Lease(shard_id(i), checkpoint, FULL, parent_shard_ids=tuple(map(shard_id, parents)))


@given(lineages())
@settings(max_examples=200, deadline=None)
def test_the_graph_and_the_assignment_call_the_same_shards_ready(lineage) -> None:
    parents, drained, trimmed = lineage
    kept = [i for i in parents if i not in trimmed]
    graph = ShardGraph()
    graph.update([listing(i, 0, MAX_HASH_KEY, parents[i]) for i in kept])
    leases = [_lease(i, parents[i], i in drained) for i in kept]
    by_id = {lease.shard_id: lease for lease in leases}
    assignable = sorted(lease.shard_id for lease in leases if is_assignable(lease, by_id))
    assert graph.ready({shard_id(i) for i in drained if i in kept}) == assignable
    planned = plan_assignment("me", leases, ["me"])
    assert planned.assignable == len(assignable)  # the plan counts by the same rule
