"""The consumer's per-shard state machine (kinesis_src/consumer/shard_state.py): no loop, no servers."""

from __future__ import annotations

import itertools

import pytest

from kinesis_src.consumer.shard_state import EndAction, ShardPhase, ShardState
from kinesis_src.records import ChildShard

SHARD = "shardId-000000000001"
CHILDREN = (ChildShard("shardId-000000000003", (SHARD,), 0, 100),)

# Every legal transition, as (from, method, to); everything else must be refused.
LEGAL = {
    (ShardPhase.FETCHING, "see_end", ShardPhase.END_SEEN),
    (ShardPhase.FETCHING, "release", ShardPhase.RELEASING),
    (ShardPhase.FETCHING, "lose", ShardPhase.LOST),
    (ShardPhase.END_SEEN, "begin_end", ShardPhase.ENDING),
    (ShardPhase.END_SEEN, "release", ShardPhase.RELEASING),
    (ShardPhase.END_SEEN, "lose", ShardPhase.LOST),
    (ShardPhase.RELEASING, "begin_end", ShardPhase.ENDING),  # only when the end was seen before the release
    (ShardPhase.RELEASING, "released", ShardPhase.RELEASED),
    (ShardPhase.RELEASING, "lose", ShardPhase.LOST),
    (ShardPhase.ENDING, "ended", ShardPhase.ENDED),
    (ShardPhase.ENDING, "lose", ShardPhase.LOST),  # the SHARD_END write failed
    (ShardPhase.LOST, "lose", ShardPhase.LOST),  # a re-take lost it, then its SHARD_END write failed too
}
METHODS = ("see_end", "begin_end", "ended", "release", "released", "lose")


def state_in(phase: ShardPhase, *, end_seen: bool | None = None) -> ShardState:
    """A state brought to ``phase`` through legal transitions only."""
    state = ShardState(SHARD)
    ending = phase in (ShardPhase.ENDING, ShardPhase.ENDED)
    saw_end = phase is ShardPhase.END_SEEN or ending if end_seen is None else end_seen
    if saw_end:
        state.see_end(CHILDREN, now=0.0)
    if phase in (ShardPhase.RELEASING, ShardPhase.RELEASED):
        state.release()
    if phase is ShardPhase.RELEASED:
        state.released()
    if ending:
        state.begin_end()
    if phase is ShardPhase.ENDED:
        state.ended()
    if phase is ShardPhase.LOST:
        state.lose()
    assert state.phase is phase
    return state


def call(state: ShardState, method: str) -> object:
    if method == "see_end":
        return state.see_end(CHILDREN, now=1.0)
    return getattr(state, method)()


@pytest.mark.parametrize("phase, method", list(itertools.product(ShardPhase, METHODS)))
def test_every_transition_is_either_legal_or_refused_without_a_change(phase: ShardPhase, method: str) -> None:
    state = state_in(phase, end_seen=True if phase is ShardPhase.RELEASING else None)
    targets = {to for frm, m, to in LEGAL if frm is phase and m == method}
    if targets:
        call(state, method)
        assert {state.phase} == targets
    else:
        with pytest.raises(RuntimeError, match=f"{SHARD}: cannot .* in state {phase.value}"):
            call(state, method)
        assert state.phase is phase


@pytest.mark.parametrize("phase", [ShardPhase.FETCHING, ShardPhase.RELEASING])
def test_a_shard_whose_end_was_never_seen_cannot_be_ended(phase: ShardPhase) -> None:
    state = state_in(phase, end_seen=False)
    with pytest.raises(RuntimeError, match="never seen"):
        state.begin_end()
    assert state.phase is phase


@pytest.mark.parametrize("phase", list(ShardPhase))
def test_what_each_phase_allows(phase: ShardPhase) -> None:
    state = state_in(phase)
    assert state.delivering == (phase in (ShardPhase.FETCHING, ShardPhase.END_SEEN))
    assert state.accepts_checkpoints == (phase not in (ShardPhase.ENDED, ShardPhase.RELEASED, ShardPhase.LOST))
    assert state.terminal == (phase in (ShardPhase.ENDED, ShardPhase.RELEASED, ShardPhase.LOST))


def test_batches_are_made_only_while_fetching_and_handed_out_only_while_delivering() -> None:
    state = ShardState(SHARD)
    assert (state.produce(), state.produce()) == (1, 2)
    state.hand_out(1)
    state.see_end(CHILDREN, now=0.0)
    with pytest.raises(RuntimeError, match="make a batch"):
        state.produce()
    state.hand_out(2)  # a queued batch still goes out after the end was seen
    state.release()
    with pytest.raises(RuntimeError, match="hand out"):
        state.hand_out(3)
    assert state.acknowledge(2) and not state.acknowledge(1)  # checkpoints still count while releasing
    state.released()
    with pytest.raises(RuntimeError, match="acknowledge"):
        state.acknowledge(3)


# -- which batch ends the shard --------------------------------------------------------------


def test_a_shard_whose_batches_are_all_acknowledged_ends_now() -> None:
    state = ShardState(SHARD)
    state.produce(), state.hand_out(1), state.acknowledge(1)
    assert state.see_end(CHILDREN, now=5.0) is EndAction.END_NOW
    assert state.end is not None and state.end.children == CHILDREN and state.end.seen_at == 5.0


def test_a_shard_that_delivered_nothing_ends_now() -> None:
    state = ShardState(SHARD)
    assert state.see_end((), now=0.0) is EndAction.END_NOW and state.covers_end(1)


def test_the_last_batch_still_queued_ends_the_shard() -> None:
    state = ShardState(SHARD)
    for _ in range(3):
        state.produce()
    state.hand_out(2)
    assert state.see_end(CHILDREN, now=0.0) is EndAction.LAST_QUEUED
    assert [state.covers_end(i) for i in (1, 2, 3)] == [False, False, True]
    assert state.produced == 3  # no extra batch


def test_a_last_batch_already_handed_out_unacknowledged_gets_an_empty_batch_after_it() -> None:
    state = ShardState(SHARD)
    state.produce(), state.produce()
    state.hand_out(2)
    state.acknowledge(1)
    assert state.see_end(CHILDREN, now=0.0) is EndAction.DELIVER_END_BATCH
    assert state.produced == 3  # the empty batch's number
    # Either the records' batch (if the application checkpoints it after all) or the empty one ends it.
    assert [state.covers_end(i) for i in (1, 2, 3)] == [False, True, True]


def test_time_past_the_end_is_measured_until_the_shard_finishes() -> None:
    state = ShardState(SHARD)
    state.produce(), state.hand_out(1)
    assert state.past_end_s(100.0) is None
    state.see_end(CHILDREN, now=100.0)
    assert state.past_end_s(161.5) == pytest.approx(61.5)
    state.begin_end()
    state.acknowledge(2)
    state.ended()
    assert state.past_end_s(200.0) is None


# -- what a holding tells its batches (parallel processing reads both) ---------------------------


def test_a_holding_carries_its_leases_owner_switches_and_its_batches_say_whether_it_still_delivers() -> None:
    import asyncio

    from kinesis_src.consumer.batch import Batch
    from kinesis_src.consumer.metrics import ConsumerMetrics
    from kinesis_src.consumer.shard_state import HeldShard, Holdings
    from kinesis_src.leases.held_leases import HeldLeases
    from kinesis_src.leases.model import Checkpoint, Lease
    from kinesis_src.records import RecordPage
    from lineage import HashRange

    async def scenario() -> tuple[int, int, bool, bool]:
        lease = Lease(SHARD, Checkpoint.trim_horizon(), HashRange(0, 10), counter=4, owner="me",
                      owner_switches_since_checkpoint=3)
        leases = HeldLeases[HeldShard]()
        leases.hold(lease, 0.0)
        held = Holdings(leases, ConsumerMetrics("me"), 1).take(lease)
        page = RecordPage(["k"], [b"x"], ["1"], [None], [None], "it", 0)

        async def never(batch: Batch, record: object) -> None:
            raise AssertionError("not checkpointed here")

        batch = Batch("s", SHARD, page, 1, held.generation, never, held.state)
        before = batch.delivering
        held.state.release()
        return held.state.owner_switches, batch.owner_switches_since_checkpoint, before, batch.delivering

    assert asyncio.run(scenario()) == (3, 3, True, False)
