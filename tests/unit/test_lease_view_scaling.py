"""The lease re-read interval scales with leases x workers (bounded), so a big fleet's reads stay
within a partition's read capacity (issue #12: at 10,000 shards and 100 workers the fixed 30 s
re-read alone needed ~2,800 RCU/s on one partition key)."""

from __future__ import annotations

import pytest

from kinesis_src.leases.model import Checkpoint, Lease, TableView, WorkerHeartbeat
from kinesis_src.leases.table_calls import TableCalls
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.leases.view import ViewReader
from lineage import HashRange


def test_the_refresh_interval_is_the_configured_one_for_small_fleets() -> None:
    timing = LeaseTiming()
    assert timing.refresh_s_for(leases=1000, workers=10) == 30.0
    assert timing.lease_read_gap_s(leases=1000, workers=10) < timing.scan_s  # announced changes: next scan


@pytest.mark.parametrize("leases, workers", [(10_000, 100), (5_000, 50), (20_000, 40)])
def test_the_refresh_interval_keeps_the_fleets_reads_within_budget(leases: int, workers: int) -> None:
    timing = LeaseTiming()
    refresh = timing.refresh_s_for(leases=leases, workers=workers)
    rcu_per_read = leases * 350 / 4096
    assert refresh > 30.0
    assert workers * rcu_per_read / refresh <= 300.0 + 1e-6  # a tenth of one partition's 3,000 RCU/s
    # spread over more partition keys, each key carries less, so the interval can be shorter
    assert timing.refresh_s_for(leases=leases, workers=workers, partitions=8) < refresh
    gap = timing.lease_read_gap_s(leases=leases, workers=workers)
    assert 0 < gap <= timing.failover_s
    assert workers * rcu_per_read / gap <= 1500.0 + 1e-6 or gap == timing.failover_s  # half a partition


def test_the_refresh_interval_is_bounded_and_zero_stays_every_scan() -> None:
    timing = LeaseTiming()
    assert timing.refresh_s_for(leases=1_000_000, workers=1000) == 10 * 30.0
    assert LeaseTiming(lease_refresh_interval_s=0).refresh_s_for(leases=10**6, workers=1000) == 0.0
    assert LeaseTiming(lease_refresh_interval_s=0).lease_read_gap_s(leases=10**6, workers=1000) == 0.0


class _Table:
    """Heartbeats of ``workers`` workers; ``announce()`` changes one worker's leaseChanges."""

    def __init__(self, leases: int, workers: int) -> None:
        self.leases = {f"s{i}": Lease(f"s{i}", Checkpoint.trim_horizon(), HashRange(0, 1)) for i in range(leases)}
        self.workers = {f"w{i}": WorkerHeartbeat(f"w{i}", "x", 1, 0) for i in range(workers)}
        self.scans = 0

    dynamodb = None  # TableCalls hands its methods a client they do not use

    async def alist_workers(self, dynamodb: object) -> dict[str, WorkerHeartbeat]:
        return dict(self.workers)

    async def ascan(self, dynamodb: object) -> TableView:
        self.scans += 1
        return TableView(dict(self.leases), dict(self.workers))

    def announce(self) -> None:
        beat = self.workers["w0"]
        self.workers["w0"] = WorkerHeartbeat("w0", "x", beat.heartbeat + 1, 0, changes=beat.changes + 1)


def test_a_big_fleet_reads_announced_changes_at_most_once_per_gap() -> None:
    now = [0.0]
    table = _Table(leases=10_000, workers=100)
    timing = LeaseTiming()
    views = ViewReader(TableCalls(table), timing, lambda: now[0])  # type: ignore[arg-type]
    views.read()
    gap = timing.lease_read_gap_s(leases=10_000, workers=100)
    assert gap > timing.scan_s
    table.announce()
    now[0] += timing.scan_s
    _, read = views.read()
    assert not read and table.scans == 1  # announced, but the last read is too recent
    now[0] = gap
    _, read = views.read()
    assert read and table.scans == 2  # the announcement was not forgotten


def test_a_small_fleet_reads_an_announced_change_at_the_next_scan() -> None:
    now = [0.0]
    table = _Table(leases=100, workers=4)
    views = ViewReader(TableCalls(table), LeaseTiming(), lambda: now[0])  # type: ignore[arg-type]
    views.read()
    table.announce()
    now[0] += LeaseTiming().scan_s
    assert views.read()[1] and table.scans == 2
