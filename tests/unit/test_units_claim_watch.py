"""How a worker without a range judges sticky claims at its housekeeping ticks (unit_readers.ClaimWatch)."""

from __future__ import annotations

from kinesis_src.consumer.range_claims import RangeClaim
from kinesis_src.consumer.unit_readers import ClaimWatch
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
