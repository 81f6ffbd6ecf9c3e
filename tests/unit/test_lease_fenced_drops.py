"""A write rejected by the fence drops only the holding it was fenced on, not a newer one of the same shard.

``shard_ended`` and ``checkpoint`` write with the lease held when they
started. If the worker released the shard and took it again meanwhile (a new
holding, counter + 2), the write is rejected (``LeaseLostError``), but the
lease this worker holds now is still its own: dropping it by shard id made
the consumer lose it, and the next cycle take it again (an extra take).
"""

from __future__ import annotations

from typing import Callable

import pytest

from kinesis_src.errors import LeaseLostError
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.records import ChildShard
from tests.unit.test_leases_coordinator import (  # noqa: F401
    FULL,
    TIMING,
    Clock,
    Recorder,
    dynamodb,
    seed,
    sid,
    table_for,
    worker,
)


def _retaken_during(coordinator: LeaseCoordinator, clock: Clock, write: Callable) -> Callable:
    """``write`` (a table's coroutine), run after this worker released sid(0) and took it again (a
    newer holding)."""
    async def retaken_first(dynamodb: object, lease: Lease, *args: object) -> object:
        coordinator.release(sid(0))
        clock.advance(TIMING.scan_s)
        assert coordinator.run_once().acquired == [sid(0)]
        return await write(dynamodb, lease, *args)
    return retaken_first


@pytest.mark.parametrize("write", ["shard_ended", "checkpoint"])
def test_a_rejected_write_keeps_the_newer_holding_of_the_same_shard(dynamodb, write: str) -> None:  # noqa: F811
    clock = Clock()
    seed(dynamodb, 1)
    a = worker(dynamodb, "a", clock, listener=(rec := Recorder()))
    a.run_once()
    first = a.lease(sid(0))
    table = a.table
    if write == "shard_ended":
        table.amark_shard_end = _retaken_during(a, clock, table.amark_shard_end)  # type: ignore[method-assign]
        with pytest.raises(LeaseLostError):
            a.shard_ended(sid(0), [ChildShard(sid(1), (sid(0),), 0, FULL.end)])
    else:
        table.acheckpoint = _retaken_during(a, clock, table.acheckpoint)  # type: ignore[method-assign]
        with pytest.raises(LeaseLostError):
            a.checkpoint(sid(0), Checkpoint.sequence("7"))
    newer = table_for(dynamodb).get_lease(sid(0))
    assert (newer.owner, newer.counter) == ("a", first.counter + 2)
    assert a.lease(sid(0)).counter == newer.counter  # still held, at the newer counter
    assert rec.events.count(("lost", sid(0))) == 0
    clock.advance(TIMING.scan_s)
    assert a.run_once().acquired == []  # no extra take
    assert table_for(dynamodb).get_lease(sid(0)).counter == newer.counter


@pytest.mark.parametrize("write", ["shard_ended", "checkpoint"])
def test_a_write_of_an_older_holding_does_not_land_on_the_newer_lease(dynamodb, write: str) -> None:  # noqa: F811
    """A write that names the counter of the holding it comes from is refused, with nothing written,
    once this worker holds the shard again at another counter (a checkpoint of the old holding could
    otherwise move the new holding's checkpoint; its SHARD_END would end a shard the new one reads)."""
    clock = Clock()
    seed(dynamodb, 1)
    a = worker(dynamodb, "a", clock)
    a.run_once()
    old = a.lease(sid(0))
    a.release(sid(0))
    clock.advance(TIMING.scan_s)
    assert a.run_once().acquired == [sid(0)]
    with pytest.raises(LeaseLostError, match="counter"):
        if write == "checkpoint":
            a.checkpoint(sid(0), Checkpoint.sequence("7"), counter=old.counter)
        else:
            a.shard_ended(sid(0), [ChildShard(sid(1), (sid(0),), 0, FULL.end)], counter=old.counter)
    stored = table_for(dynamodb).get_lease(sid(0))
    assert (stored.owner, stored.counter) == ("a", old.counter + 2)
    assert stored.checkpoint == Checkpoint.trim_horizon() and not stored.is_shard_end
    assert a.lease(sid(0)).counter == stored.counter
