"""The two-phase steal when the thief is declared dead while its request is open (issue #23).

While the thief has no heartbeat item, a holder that reads the request
ignores it (:func:`~kinesis_src.leases.steal_requests.requested_of`) and its
view stays fresh. The announcement the thief saw acknowledged told that
holder nothing it acted on, so the thief must not force on its strength once
it registered again: it asks anew, and the holder releases gracefully.
"""

from __future__ import annotations

from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.cycle_report import CycleReport
from kinesis_src.in_place import run_sync
from kinesis_src.leases.table import LeaseTable
from tests.unit.test_leases_coordinator import (  # noqa: F401
    TIMING,
    Clock,
    dynamodb,
    owners,
    seed,
    table_for,
    worker,
)

FAILOVER_STEPS = int(TIMING.failover_s / TIMING.scan_s) + 2


def _step(clock: Clock, holder: LeaseCoordinator) -> None:
    """One scan interval passes; the holder's heartbeats land, its scans stall (throttled reads)."""
    clock.advance(TIMING.scan_s)
    holder.renewal.renew_if_due()


def _announced_request(clock: Clock, holder: LeaseCoordinator, thief: LeaseCoordinator) -> str:
    """The thief asks the holder for a lease and sees its announcement acknowledged; the shard asked for."""
    requested: list[str] = []
    while not requested:
        _step(clock, holder)
        thief.renewals.step()
        requested = thief.run_once().requested
    thief.renewals.step()  # the announcement naming the holder lands
    _step(clock, holder)
    thief.run_once()  # dates it
    assert thief.steals.book.open[requested[0]].announced_at is not None
    return requested[0]


def _declare_dead(clock: Clock, holder: LeaseCoordinator, table: LeaseTable, name: str) -> None:
    """``name`` stalls (no heartbeats) past the failover time; another worker declares it dead."""
    for _ in range(FAILOVER_STEPS):
        _step(clock, holder)
    assert table.declare_worker_dead(table.list_workers()[name])


def _no_force_on_a_fresh_holder(report: CycleReport, holder: LeaseCoordinator, shard: str) -> None:
    forced_fresh = shard in report.stolen and shard in holder.held() and holder.view_is_fresh()
    assert not forced_fresh, f"{shard} forced from a holder that still delivers from a fresh view"


def test_a_thief_declared_dead_asks_again_before_it_forces(dynamodb) -> None:  # noqa: F811
    """The holder read the request while the thief was dead, ignored it and stays fresh: the thief,
    registered again, never forces the lease from it; the holder hands it over gracefully."""
    seed(dynamodb, 4)
    clock, table = Clock(), table_for(dynamodb)
    a = worker(dynamodb, "a", clock)
    a.run_once()
    c = worker(dynamodb, "c", clock)
    c.renewals.own_schedule(lambda: None)  # c's heartbeats are sent only when this test steps them
    shard = _announced_request(clock, a, c)
    _declare_dead(clock, a, table, "c")
    assert a.run_once().released == [] and shard in a.held() and a.view_is_fresh()  # c has no heartbeat
    released: list[str] = []
    for _ in range(3 * FAILOVER_STEPS):
        _step(clock, a)
        c.renewals.step()  # the first one finds c declared dead: it registers anew
        _no_force_on_a_fresh_holder(c.run_once(), a, shard)
        released += a.run_once().released
    assert shard in released and owners(dynamodb)[shard] == "c"


def test_a_forced_steal_is_not_taken_by_a_later_incarnation(dynamodb) -> None:  # noqa: F811
    """A request due as the renewal learns that this worker was declared dead (and registers again)
    is not forced: the take is checked against the incarnation the request was written in."""
    seed(dynamodb, 1)
    clock, table = Clock(), table_for(dynamodb)
    a = worker(dynamodb, "a", clock)
    a.run_once()
    c = worker(dynamodb, "c", clock)
    lease = table.list_leases()[0]
    written_in = c.held_leases.incarnation
    c._declared_dead()
    c.register()
    assert c.is_live()
    assert not run_sync(c.ownership.take(lease, "forced", CycleReport(), victim="a", incarnation=written_in))
    assert owners(dynamodb)[lease.shard_id] == "a"
