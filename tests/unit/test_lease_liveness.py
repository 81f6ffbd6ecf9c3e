"""A worker that is not live (its heartbeat overdue, or deleted by another worker) takes no lease.

Once another worker has declared it dead, its leases are free for the others
to take "from a dead worker". A take of its own in that window (a free
lease, or one still named for its id, adopted) would be trusted again as soon
as it registered anew, while another worker took the same lease from the
"dead" one: two holders (the lease simulation under throttled writes, and the
fault logs: a take 1.2 s after its worker was declared dead). So the cycle
takes nothing while the worker is not live, and a take that was in flight
when the worker learnt it had been declared dead is not held.
"""

from __future__ import annotations

import logging

import pytest

from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import HeartbeatStatus, Lease
from kinesis_src.leases.timing import LeaseTiming
from tests.lease_sim import SimConfig, Simulation
from tests.lease_sim.safety import AFTER_EXPIRY, LIVE_OWNER
from tests.unit.test_leases_coordinator import (  # noqa: F401
    TIMING,
    Clock,
    dynamodb,
    owners,
    seed,
    sid,
    table_for,
    worker,
)

SIM_TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0)
# 40 leases, 6 workers, then 2 join; lease writes throttled at 15 WCU per key: seeds in which a worker
# declared dead took (adopted) a lease before it registered again, and another took it from the "dead" one
DECLARED_DEAD_SEEDS = (12, 35, 41)


def test_no_worker_takes_a_lease_while_declared_dead_in_the_throttled_simulation(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="kinesis_src")  # restored after the test
    overlaps, deaths = [], 0
    for seed_ in DECLARED_DEAD_SEEDS:
        config = SimConfig(shards=40, workers=6, seed=seed_, wcu_per_key=15.0, timing=SIM_TIMING, phase_timeout_s=40)
        with Simulation(config) as sim:
            start = sim.phase("start", lambda: sim.start_workers(6))
            join = sim.phase("join", lambda: sim.start_workers(2), duration_s=20)
            deaths += start.moves.get("declared dead", 0) + join.moves.get("declared dead", 0)
            overlaps += [(seed_, v.how, v.shard_id, v.holder, v.taker, round(v.at, 2)) for v in sim.checker.violations
                         if v.how in (AFTER_EXPIRY, LIVE_OWNER)]
    assert deaths > 0  # the throttled heartbeats did get workers declared dead
    assert overlaps == [], "two holders after a worker was declared dead (seed, how, shard, holder, taker, at)"


def _own_schedule(coordinator: LeaseCoordinator) -> LeaseCoordinator:
    """Its heartbeats are sent only when the test steps the renewal (as if throttled otherwise)."""
    coordinator.renewals.own_schedule(lambda: None)
    return coordinator


def test_a_worker_whose_heartbeat_is_overdue_takes_nothing(dynamodb) -> None:  # noqa: F811
    clock = Clock()
    seed(dynamodb, 4)
    a = _own_schedule(worker(dynamodb, "a", clock))
    clock.advance(TIMING.failover_s)  # no heartbeat acknowledged since: another may have declared it dead
    assert not a.is_live()
    report = a.run_once()
    assert report.acquired == [] and set(owners(dynamodb).values()) == {None}
    table = table_for(dynamodb)
    table.take_lease(table.get_lease(sid(0)), "a")  # named for its id: adopting it is a take too
    a._views.invalidate()  # unannounced: read at the next cycle
    assert a.run_once().acquired == [] and owners(dynamodb)[sid(0)] == "a"
    assert a.renewals.step() is not None and a.is_live()  # once renewed, it takes its share
    assert sorted(a.run_once().acquired) == [sid(i) for i in range(4)]


def test_a_take_in_flight_when_the_worker_learns_it_was_declared_dead_is_not_held(dynamodb) -> None:  # noqa: F811
    """The take started while the worker was live and landed after its renewal had found the heartbeat
    deleted, dropped every lease and registered again: the lease may be taken from the "dead" worker by
    anyone whose view still misses it, so it is not trusted; the next cycle re-takes it (counter + 1)."""
    clock = Clock()
    seed(dynamodb, 1)
    a = _own_schedule(worker(dynamodb, "a", clock))
    table = a.table
    take = table.atake_lease
    statuses: list[HeartbeatStatus] = []

    async def declared_dead_meanwhile(dynamodb: object, lease: Lease, new_owner: str) -> Lease | None:
        table.declare_worker_dead(table.list_workers()["a"])  # another worker, on an older observation
        statuses.append(a.renewal.renew())  # the renewal thread finds out and registers again
        return await take(dynamodb, lease, new_owner)

    table.atake_lease = declared_dead_meanwhile  # type: ignore[method-assign]
    report = a.run_once()
    assert statuses == [HeartbeatStatus.DECLARED_DEAD] and a.is_live()
    assert a.held() == {} and report.acquired == []
    table.atake_lease = take  # type: ignore[method-assign]
    taken = table.get_lease(sid(0))
    assert taken.owner == "a"
    assert a.run_once().acquired == [sid(0)]  # adopted with a fenced take
    assert a.lease(sid(0)).counter == taken.counter + 1
