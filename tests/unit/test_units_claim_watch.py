"""Liveness at the units' edges: claims judged by workers without a range (range_claims.live_and_dead, by the one
ExpiryJudge), candidates watched until they move or expire (range_claims.observe_live), and
a split waiting for a unit's readers to leave (unit_split.wait_until_unread), and a retired unit's lease
set never synced again (unit_split.UnitShardSync)."""

from __future__ import annotations

import asyncio

import pytest
from consumer_harness import awaiting

from kinesis_src.consumer import Consumer, ConsumerConfig
from kinesis_src.consumer.range_claims import RangeClaim, live_and_dead, observe_live
from kinesis_src.consumer.unit_split import UnitShardSync, wait_until_unread
from kinesis_src.consumer.units import FULL, UnitMap
from kinesis_src.errors import KinesisSourceError
from kinesis_src.in_place import run_sync
from kinesis_src.leases.expiry import ExpiryJudge
from kinesis_src.leases.model import WorkerHeartbeat
from lineage import KeyRange


def claim(worker: str, heartbeat: int, session: str = "s1") -> RangeClaim:
    return RangeClaim(worker, KeyRange.slice(0, 2), session, heartbeat, 1)


def test_a_claim_is_live_until_it_stops_moving_for_the_failover_time_on_the_watcher_s_clock() -> None:
    now = [100.0]
    judge = ExpiryJudge(3.0, lambda: now[0])
    assert live_and_dead(judge, [claim("a", 0)]) == ([claim("a", 0)], [])  # first sight: live
    now[0] += 2.9
    assert live_and_dead(judge, [claim("a", 0)])[1] == []
    now[0] += 0.2
    assert live_and_dead(judge, [claim("a", 0)]) == ([], [claim("a", 0)])  # unchanged for 3.1 s: dead
    assert live_and_dead(judge, [claim("a", 1)]) == ([claim("a", 1)], [])  # it moved: live again, clock restarts
    now[0] += 2.0
    assert live_and_dead(judge, [claim("a", 1, session="s2")])[1] == []  # a new session is a change too
    now[0] += 2.0
    assert live_and_dead(judge, [claim("a", 1, session="s2")])[1] == []


def test_a_claim_gone_and_back_starts_over() -> None:
    now = [0.0]
    judge = ExpiryJudge(1.0, lambda: now[0])
    live_and_dead(judge, [claim("a", 5)])
    now[0] += 0.8
    live_and_dead(judge, [])  # deleted (released, or judged dead by another worker)
    now[0] += 0.8
    assert live_and_dead(judge, [claim("a", 5)]) == ([claim("a", 5)], [])  # seen again: first sight


class _ReadUnit:
    """A unit's lease set whose one reader (a worker of a version without units) never leaves."""

    stream, application, scope = "orders", "app", ""

    def __init__(self) -> None:
        self.beats = 0

    async def alist_workers(self, dynamodb: object) -> dict[str, WorkerHeartbeat]:
        self.beats += 1
        return {"old": WorkerHeartbeat("old", "s", self.beats)}


def test_a_split_gives_up_naming_a_reader_that_never_hands_the_unit_over() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.25
        return now[0]

    with pytest.raises(KinesisSourceError, match=r"the whole hash space is still read by 'old' after 10 failover"):
        run_sync(wait_until_unread(_ReadUnit(), None, 0.5, clock=clock, sleep=lambda _s: None))  # type: ignore[arg-type]
    assert now[0] >= 10 * 0.5


class _CountingSync:
    def __init__(self) -> None:
        self.runs = 0

    async def arun(self, leases: object = None) -> str:
        self.runs += 1
        return "synced"


def test_a_retired_unit_s_lease_set_is_never_synced_again() -> None:
    """A reader paused through a split must not recreate the emptied set at the initial position."""
    lower = KeyRange.slice(0, 2)
    maps = [UnitMap(), UnitMap().with_claim(lower, "sticky")]
    maps.append(maps[1].after(maps[1].splits[0]))
    sync = _CountingSync()

    async def first() -> UnitMap:
        return maps[0]

    whole = UnitShardSync(sync, FULL, first)
    assert run_sync(whole.arun()) == "synced"  # no registry: the whole space is the one unit
    maps.pop(0)
    assert not run_sync(whole.arun()).changed  # being split
    maps.pop(0)
    assert not run_sync(whole.arun()).changed  # split
    assert sync.runs == 1
    assert run_sync(UnitShardSync(sync, lower, first).arun()) == "synced"


class _UnreadableRegistry:
    async def aread_all(self, dynamodb: object) -> None:
        raise ValueError("units [0-5] do not tile 0-340282366920938463463374607431768211455")


def test_a_registry_that_cannot_be_read_fails_the_consumer_instead_of_ending_its_housekeeping() -> None:
    consumer = Consumer(ConsumerConfig("orders", application_name="app", worker_id="w", region="us-east-1"))
    consumer.units._claims["orders"] = _UnreadableRegistry()  # type: ignore[assignment]
    asyncio.run(consumer.units.refresh())
    assert type(consumer.failure) is ValueError


class _Script:
    """Heartbeat readings in turn (the last repeats); every reading moves a fake clock on by 0.3 s."""

    def __init__(self, *readings: dict[str, tuple[str, int]]) -> None:
        self.readings = list(readings)
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self) -> dict[str, tuple[str, int]]:
        self.now += 0.3
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def test_a_watched_worker_gone_and_back_is_live_not_dead() -> None:
    """'a' leaves and comes back (a new session) while 'b' stands still: a is seen afresh, so it is live,
    as a claim gone and back is (the one judge forgets what is gone); it must not stay judged gone."""
    beats = _Script({"a": ("s1", 1), "b": ("s", 7)}, {"b": ("s", 7)}, {"a": ("s2", 0), "b": ("s", 7)})
    live = run_sync(observe_live({"a": "A", "b": "B"}, awaiting(beats), 1.0, beats.clock, poll_s=0.0))
    assert live == ["A"]


def test_observed_candidates_unchanged_for_the_failover_time_are_dead_and_a_move_is_live() -> None:
    still = _Script({"a": ("s1", 1), "b": ("s", 7)})
    assert run_sync(observe_live({"a": "A", "b": "B"}, awaiting(still), 1.0, still.clock, poll_s=0.0)) == []
    assert still.now >= 1.0  # judged only once unchanged for the whole failover time
    moving = _Script({"a": ("s1", 1), "b": ("s", 7)}, {"a": ("s1", 1), "b": ("s", 7)}, {"a": ("s1", 2), "b": ("s", 7)})
    assert run_sync(observe_live({"a": "A", "b": "B"}, awaiting(moving), 1.0, moving.clock, poll_s=0.0)) == ["A"]
    assert moving.now < 1.0  # returns at the first move, not after the failover time


def test_a_claim_that_pauses_then_resumes_within_the_failover_time_stays_live() -> None:
    now = [0.0]
    judge = ExpiryJudge(3.0, lambda: now[0])
    for beat in range(3):  # moves every 2.5 s: each move restarts the wait, so it is never dead
        assert live_and_dead(judge, [claim("a", beat)])[1] == []
        now[0] += 2.5
        assert live_and_dead(judge, [claim("a", beat)])[1] == []
    now[0] += 0.5
    assert live_and_dead(judge, [claim("a", 2)])[1] == [claim("a", 2)]


def test_an_observer_paused_past_the_failover_time_judges_by_what_it_reads_on_waking() -> None:
    """The observer's own pause (a suspended host, a stalled loop) proves nothing: a claim that moved
    meanwhile is live; only one unchanged since it was first seen is dead."""
    now = [0.0]
    judge = ExpiryJudge(3.0, lambda: now[0])
    live_and_dead(judge, [claim("moved", 1), claim("still", 1)])
    now[0] += 60.0
    assert live_and_dead(judge, [claim("moved", 9), claim("still", 1)]) == ([claim("moved", 9)], [claim("still", 1)])


def test_an_owner_that_pauses_then_resumes_while_watched_is_live() -> None:
    steady = {"a": ("s1", 1)}
    beats = _Script(steady, steady, steady, {"a": ("s1", 2)})  # still for 0.6 s, then a beat
    assert run_sync(observe_live({"a": "A"}, awaiting(beats), 1.0, beats.clock, poll_s=0.0)) == ["A"]


def test_wall_clocks_are_never_read_or_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Liveness reads the injected clock only: a claim whose writer's clock is years off is judged like
    any other, and the judges never look at this host's wall clock."""
    import time

    def wall() -> float:
        raise AssertionError("the wall clock was read")

    monkeypatch.setattr(time, "time", wall)
    now = [0.0]
    judge = ExpiryJudge(3.0, lambda: now[0])
    ancient, future = claim("ancient", 0), claim("future", 10**15)
    assert live_and_dead(judge, [ancient, future]) == ([ancient, future], [])
    now[0] += 3.0
    assert live_and_dead(judge, [ancient, future]) == ([], [ancient, future])
    still = _Script({"a": ("s1", 10**15)})
    assert run_sync(observe_live({"a": "A"}, awaiting(still), 1.0, still.clock, poll_s=0.0)) == []
