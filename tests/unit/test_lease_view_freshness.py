"""A view is fresh only while it reflects every ownership change announced to it (issue #12).

At scale a worker's lease reads are at least ``lease_read_gap_s`` apart, so a
cycle may see an announcement (a thief's ``leaseChanges`` bump) and defer
the lease read. Dating the view by that cycle's heartbeat read kept
``view_is_fresh()`` true while the steal was unread: the consumer went on
delivering a stolen shard for up to the gap (6.65 s at 10,000 shards / 100
workers, the simulation's "forced steal" windows).
"""

from __future__ import annotations

from kinesis_src.leases.steal_requests import STEAL_PATIENCE_RENEWALS
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.table_calls import TableCalls
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.leases.view import ViewReader
from tests.unit.test_lease_view_scaling import _Table
from tests.unit.test_leases_coordinator import (  # noqa: F401
    TIMING,
    Clock,
    dynamodb,
    seed,
    table_for,
    worker,
)

GAP_S = 10.0


class _SpacedReads(LeaseTiming):
    """The unit-test timing (failover 3 s, renewal 1 s), with lease reads ``GAP_S`` apart as at scale."""

    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        return GAP_S


SPACED = _SpacedReads(failover_s=TIMING.failover_s, renew_interval_s=TIMING.renew_interval_s)
PATIENCE_S = STEAL_PATIENCE_RENEWALS * SPACED.renew_s


def _announce(table: LeaseTable, worker_id: str) -> None:
    """Another worker changes ownership and says so in its heartbeat (``leaseChanges`` + 1)."""
    table.heartbeat(table.list_workers()[worker_id], changed=True)


def test_the_reader_dates_its_view_by_the_last_read_that_saw_every_announcement() -> None:
    now = [0.0]
    table = _Table(leases=10_000, workers=100)
    views = ViewReader(TableCalls(table), LeaseTiming(), lambda: now[0])  # type: ignore[arg-type]
    views.read()
    assert views.current_at == 0.0
    now[0] = 1.0
    views.read()
    assert views.current_at == 1.0  # nothing announced: the cached leases are current
    table.announce()
    now[0] = 2.0
    _, read = views.read()
    assert not read and views.current_at == 1.0  # announced but deferred: the view is as of 1.0
    now[0] = 1.0 + LeaseTiming().lease_read_gap_s(10_000, 100)
    _, read = views.read()
    assert read and views.current_at == now[0]


def test_a_deferred_announced_change_makes_the_view_stale_after_the_steal_patience(dynamodb) -> None:  # noqa: F811
    clock = Clock()
    seed(dynamodb, 4)
    a = worker(dynamodb, "a", clock, timing=SPACED)
    worker(dynamodb, "b", clock, timing=SPACED)
    read_at = clock()
    assert a.run_once().read_leases
    clock.advance(SPACED.scan_s)
    _announce(table_for(dynamodb), "b")  # b took or stole leases, and says so
    assert not a.run_once().read_leases  # within the gap: deferred
    clock.now = read_at + PATIENCE_S + 0.01  # within the patience of that deferring cycle, not of the read
    assert not a.view_is_fresh()  # the announced change is still unread
    clock.now = read_at + GAP_S
    assert a.run_once().read_leases
    assert a.view_is_fresh()


def test_own_announcements_do_not_make_the_view_stale(dynamodb) -> None:  # noqa: F811
    """A worker knows its own takes and releases: only others' announcements can hide a steal."""
    clock = Clock()
    seed(dynamodb, 4)
    a = worker(dynamodb, "a", clock, timing=SPACED)
    a.run_once()  # reads, takes all four, announces
    clock.advance(SPACED.scan_s)
    report = a.run_once()
    assert not report.read_leases  # its own announcement, within the gap
    clock.advance(PATIENCE_S - 0.1)
    assert a.view_is_fresh()
