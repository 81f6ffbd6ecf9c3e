"""The scheduler's lanes (kinesis_src/consumer/processing/scheduler.py): who may be in a handler at once.

Driven by random interleavings of "a batch arrives", "a record starts",
"a running record finishes / fails and waits / is woken" and "a holding is
lost": in "key" mode no two records of a key ever run together and each
key's records start (first time) in the order they arrived; in "shard" mode
the same per holding; "unordered" lets everything run.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_src.consumer.processing.options import Ordering
from kinesis_src.consumer.processing.scheduler import Entry, EntryState, Scheduler
from kinesis_src.records import Record

KEYS = ("a", "b", "c")


def record(key: str, seq: int, shard: str) -> Record:
    return Record(key, b"x", f"{seq:05d}", 0, shard, None, stream="s")


Step = tuple[str, int]


@given(st.lists(st.tuples(st.sampled_from(["admit", "take", "finish", "park", "wake", "drop"]),
                          st.integers(0, 50)), max_size=120),
       st.sampled_from([Ordering.KEY, Ordering.SHARD]))
@example([("admit", 0), ("admit", 3), ("take", 0), ("park", 0), ("take", 0), ("wake", 0), ("take", 0)], Ordering.KEY)
@example([("admit", 0), ("admit", 0), ("take", 0), ("drop", 0), ("admit", 0), ("take", 0), ("finish", 0)], Ordering.KEY)
def test_a_lane_runs_one_record_at_a_time_in_arrival_order(steps: list[Step], ordering: Ordering) -> None:
    scheduler = Scheduler(ordering)
    holdings = [("s", "shard-0", 1), ("s", "shard-1", 1)]
    generation = {h: h for h in holdings}  # a dropped holding is replaced by a later generation
    seq = 0
    running: list[Entry] = []
    parked: list[Entry] = []
    first_start: dict[object, list[int]] = defaultdict(list)  # lane -> ordinals of holding-order, at first start
    started: set[int] = set()
    for action, n in steps:
        if action == "admit":
            holding = generation[holdings[n % 2]]
            for key in (KEYS[n % 3], KEYS[(n + 1) % 3]):
                seq += 1
                scheduler.admit(Entry(holding, seq, record(key, seq, holding[1])))
        elif action == "take":
            entry = scheduler.take()
            if entry is not None:
                running.append(entry)
                if entry.ordinal not in started:
                    started.add(entry.ordinal)
                    first_start[entry.lane].append(entry.ordinal)
        elif action == "finish" and running:
            scheduler.finish(running.pop(n % len(running)))
        elif action == "park" and running:
            entry = running.pop(n % len(running))
            scheduler.park(entry)
            parked.append(entry)
        elif action == "wake" and parked:
            scheduler.wake(parked.pop(n % len(parked)))
        elif action == "drop":
            old = generation[holdings[n % 2]]
            scheduler.drop(old)
            generation[holdings[n % 2]] = (old[0], old[1], old[2] + 1)
        lanes = defaultdict(int)
        for entry in running:
            lanes[entry.lane] += 1
        assert all(count == 1 for count in lanes.values()), f"two records of one lane run together: {dict(lanes)}"
    for lane, ordinals in first_start.items():
        assert ordinals == sorted(ordinals), f"lane {lane} started out of arrival order: {ordinals}"


def test_key_mode_runs_different_keys_together_and_a_keys_next_record_only_after_the_first_is_done() -> None:
    scheduler = Scheduler(Ordering.KEY)
    h = ("s", "shard-0", 1)
    a1, b1, a2 = (Entry(h, i, record(k, i, "shard-0")) for i, k in enumerate("aba"))
    for entry in (a1, b1, a2):
        scheduler.admit(entry)
    assert [scheduler.take(), scheduler.take(), scheduler.take()] == [a1, b1, None]
    scheduler.park(a1)  # failed: waits for a retry, still ahead of a2
    assert scheduler.take() is None
    scheduler.wake(a1)
    assert scheduler.take() is a1
    scheduler.finish(a1)
    assert scheduler.take() is a2 and a2.state is EntryState.RUNNING


def test_unordered_mode_runs_every_record_of_a_key_at_once() -> None:
    scheduler = Scheduler(Ordering.UNORDERED)
    h = ("s", "shard-0", 1)
    entries = [Entry(h, i, record("same", i, "shard-0")) for i in range(3)]
    for entry in entries:
        scheduler.admit(entry)
    assert [scheduler.take() for _ in range(3)] == entries


def test_dropping_a_holding_keeps_its_running_record_ahead_of_the_next_holdings_records_of_that_key() -> None:
    scheduler = Scheduler(Ordering.KEY)
    old, new = ("s", "shard-0", 1), ("s", "shard-0", 2)
    running = Entry(old, 0, record("a", 1, "shard-0"))
    queued = Entry(old, 1, record("a", 2, "shard-0"))
    scheduler.admit(running)
    scheduler.admit(queued)
    assert scheduler.take() is running
    assert scheduler.drop(old) == [queued] and queued.state is EntryState.DROPPED
    again = Entry(new, 0, record("a", 2, "shard-0"))  # the lease came back: redelivered from the checkpoint
    scheduler.admit(again)
    assert scheduler.take() is None  # the old holding's record of key "a" still runs
    scheduler.finish(running, EntryState.DROPPED)
    assert scheduler.take() is again


def test_finishing_a_record_that_is_not_running_is_a_bug_and_raises() -> None:
    scheduler = Scheduler(Ordering.KEY)
    entry = Entry(("s", "shard-0", 1), 0, record("a", 1, "shard-0"))
    scheduler.admit(entry)
    with pytest.raises(RuntimeError, match="in state ready"):
        scheduler.finish(entry)


@given(st.lists(st.tuples(st.sampled_from(["admit", "take", "finish", "park", "wake", "drop"]),
                          st.integers(0, 50)), max_size=120),
       st.sampled_from(list(Ordering)))
@example([("admit", 0), ("drop", 0)], Ordering.KEY)
def test_the_ready_queue_holds_only_ready_lane_heads_so_dropped_records_leave_it_at_once(
    steps: list[Step], ordering: Ordering
) -> None:
    """A dropped record must not linger in the ready queue (with its data) until a slot frees."""
    scheduler = Scheduler(ordering)
    holdings = [("s", "shard-0", 1), ("s", "shard-1", 1)]
    running: list[Entry] = []
    parked: list[Entry] = []
    seq = 0
    for action, n in steps:
        holding = holdings[n % 2]
        if action == "admit":
            seq += 1
            scheduler.admit(Entry(holding, seq, record(KEYS[n % 3], seq, holding[1])))
        elif action == "take" and (entry := scheduler.take()) is not None:
            running.append(entry)
        elif action == "finish" and running:
            scheduler.finish(running.pop(n % len(running)))
        elif action == "park" and running:
            parked.append(running.pop(n % len(running)))
            scheduler.park(parked[-1])
        elif action == "wake" and parked:
            scheduler.wake(parked.pop(n % len(parked)))
        elif action == "drop":
            scheduler.drop(holding)
            holdings[n % 2] = (holding[0], holding[1], holding[2] + 1)
        heads = {id(lane[0]) for lane in scheduler._lanes.values()}
        assert all(e.state is EntryState.READY and id(e) in heads for e in scheduler._ready), (
            f"ready queue holds {[e.state.value for e in scheduler._ready]}")


def test_dropping_holdings_again_and_again_while_nothing_is_taken_keeps_the_ready_queue_bounded() -> None:
    scheduler = Scheduler(Ordering.KEY)
    busy = Entry(("s", "shard-0", 1), 0, record("busy", 0, "shard-0"))
    scheduler.admit(busy)
    assert scheduler.take() is busy  # every slot busy: take() is not called again
    for generation in range(1, 101):
        holding = ("s", "shard-1", generation)
        for n in range(10):
            scheduler.admit(Entry(holding, n, record(f"k{n}", n, "shard-1")))
        assert len(scheduler.drop(holding)) == 10
    assert len(scheduler._ready) == 0 and scheduler.lanes == 1
