"""Liveness at the units' edges: claims judged by workers without a range (unit_readers.ClaimWatch), and
a split waiting for a unit's readers to leave (unit_split.wait_until_unread), and a retired unit's lease
set never synced again (unit_split.UnitShardSync)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kinesis_src.consumer.range_claims import RangeClaim
from kinesis_src.consumer.unit_readers import ClaimWatch, UnitReaders
from kinesis_src.consumer.unit_split import UnitShardSync, wait_until_unread
from kinesis_src.consumer.units import FULL, UnitMap
from kinesis_src.errors import KinesisSourceError
from kinesis_src.leases.model import WorkerHeartbeat
from kinesis_src.leases.timing import LeaseTiming
from lineage import KeyRange


def claim(worker: str, heartbeat: int, session: str = "s1") -> RangeClaim:
    return RangeClaim(worker, KeyRange.slice(0, 2), session, heartbeat, 1)


def test_a_claim_is_live_until_it_stops_moving_for_the_failover_time_on_the_watcher_s_clock() -> None:
    now = [100.0]
    watch = ClaimWatch(3.0, clock=lambda: now[0])
    assert watch.judge([claim("a", 0)]) == ([claim("a", 0)], [])  # first sight: live
    now[0] += 2.9
    assert watch.judge([claim("a", 0)])[1] == []
    now[0] += 0.2
    assert watch.judge([claim("a", 0)]) == ([], [claim("a", 0)])  # unchanged for 3.1 s: dead
    assert watch.judge([claim("a", 1)]) == ([claim("a", 1)], [])  # it moved: live again, clock restarts
    now[0] += 2.0
    assert watch.judge([claim("a", 1, session="s2")])[1] == []  # a new session is a change too
    now[0] += 2.0
    assert watch.judge([claim("a", 1, session="s2")])[1] == []


def test_a_claim_gone_and_back_starts_over() -> None:
    now = [0.0]
    watch = ClaimWatch(1.0, clock=lambda: now[0])
    watch.judge([claim("a", 5)])
    now[0] += 0.8
    watch.judge([])  # deleted (released, or judged dead by another worker)
    now[0] += 0.8
    assert watch.judge([claim("a", 5)]) == ([claim("a", 5)], [])  # seen again: first sight


class _ReadUnit:
    """A unit's lease set whose one reader (a worker of a version without units) never leaves."""

    stream, application, scope = "orders", "app", ""

    def __init__(self) -> None:
        self.beats = 0

    def list_workers(self) -> dict[str, WorkerHeartbeat]:
        self.beats += 1
        return {"old": WorkerHeartbeat("old", "s", self.beats)}


def test_a_split_gives_up_naming_a_reader_that_never_hands_the_unit_over() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.25
        return now[0]

    with pytest.raises(KinesisSourceError, match=r"the whole hash space is still read by 'old' after 10 failover"):
        wait_until_unread(_ReadUnit(), 0.5, clock=clock)  # type: ignore[arg-type]
    assert now[0] >= 10 * 0.5


class _CountingSync:
    def __init__(self) -> None:
        self.runs = 0

    def run(self, leases: object = None) -> str:
        self.runs += 1
        return "synced"


def test_a_retired_unit_s_lease_set_is_never_synced_again() -> None:
    """A reader paused through a split must not recreate the emptied set at the initial position."""
    lower = KeyRange.slice(0, 2)
    maps = [UnitMap(), UnitMap().with_claim(lower, "sticky")]
    maps.append(maps[1].after(maps[1].splits[0]))
    sync = _CountingSync()
    whole = UnitShardSync(sync, FULL, lambda: maps[0])
    assert whole.run() == "synced"  # no registry: the whole space is the one unit
    maps.pop(0)
    assert not whole.run().changed  # being split
    maps.pop(0)
    assert not whole.run().changed  # split
    assert sync.runs == 1
    assert UnitShardSync(sync, lower, lambda: maps[0]).run() == "synced"


class _UnreadableRegistry:
    def read_all(self) -> None:
        raise ValueError("units [0-5] do not tile 0-340282366920938463463374607431768211455")


def test_a_registry_that_cannot_be_read_fails_the_consumer_instead_of_ending_its_housekeeping() -> None:
    failures: list[BaseException] = []
    consumer = SimpleNamespace(key_range=None, streams=("orders",), worker_id="w", stopping=False, readers={},
                               timing=LeaseTiming(), fail=failures.append)
    units = UnitReaders(consumer)  # type: ignore[arg-type]
    units._claims["orders"] = _UnreadableRegistry()  # type: ignore[assignment]
    asyncio.run(units.refresh())
    assert [type(f) for f in failures] == [ValueError]
