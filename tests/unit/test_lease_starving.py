"""A starving worker says so, and waits for the others' lease reads before it steals (issue #12).

At 10,000 shards and 100 workers the loaded workers read the leases at most
every ``lease_read_gap_s`` (5.7 s) and otherwise only when someone announces
a change. A starving worker changed nothing, so its need was seen at the
others' 30 s re-read, and its steal patience (1.5 renewals, 5 s) ran out
before any of them could hand a lease over: crash and leave phases did not
converge within 60 s, with 50 forced steals (the lease simulation).
"""

from __future__ import annotations

from kinesis_src.leases.steal_requests import STEAL_PATIENCE_RENEWALS
from kinesis_src.leases.timing import LeaseTiming
from tests.unit.test_lease_view_freshness import GAP_S, SPACED
from tests.unit.test_leases_coordinator import (  # noqa: F401
    TIMING,
    Clock,
    dynamodb,
    seed,
    table_for,
    worker,
)


def _changes(dynamodb, worker_id: str) -> int:  # noqa: F811
    return table_for(dynamodb).list_workers()[worker_id].changes


def test_a_starving_worker_announces_its_need_once_per_one_and_a_half_renewals(dynamodb) -> None:  # noqa: F811
    clock = Clock()
    seed(dynamodb, 6)
    a = worker(dynamodb, "a", clock)
    a.run_once()  # alone: takes all six
    b = worker(dynamodb, "b", clock)
    report = b.run_once()
    assert report.acquired == [] and report.stolen == []  # nothing free; a steal must wait
    assert report.announced and _changes(dynamodb, "b") == 1  # but the others hear of the need now
    clock.advance(TIMING.scan_s)
    b.run_once()
    assert _changes(dynamodb, "b") == 1  # not again within 1.5 renewals
    clock.advance(STEAL_PATIENCE_RENEWALS * TIMING.renew_s)
    b.run_once()
    assert _changes(dynamodb, "b") >= 2 or b.held()  # still starving: said again (or it stole)


def test_with_spaced_reads_a_starving_worker_waits_one_read_gap_longer_before_it_steals(dynamodb) -> None:  # noqa: F811
    """The loaded workers read the leases at most every ``lease_read_gap_s``: a steal before that
    has passed since the need was announced comes before any of them could hand a lease over."""
    clock = Clock()
    seed(dynamodb, 7)
    table = table_for(dynamodb)
    a, b = worker(dynamodb, "a", clock, timing=SPACED), worker(dynamodb, "b", clock, timing=SPACED)
    for i, lease in enumerate(sorted(table.list_leases(), key=lambda l: l.shard_id)):
        table.take_lease(lease, "a" if i < 3 else "b")  # a 3, b 4: c starves, nothing is free
    c = worker(dynamodb, "c", clock, timing=SPACED)
    wished_at = clock()
    stolen_at = None
    while stolen_at is None and clock() < wished_at + 3 * GAP_S:
        for loaded in (a, b):
            loaded.renewal.renew_if_due()  # alive, but not cycling: they never hand over
        if c.run_once().stolen:
            stolen_at = clock()
        clock.advance(SPACED.scan_s)
    patience = STEAL_PATIENCE_RENEWALS * SPACED.renew_s
    assert stolen_at is not None  # the fallback still comes
    assert stolen_at - wished_at >= patience + GAP_S


class _LongGap(LeaseTiming):
    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        return 3 * GAP_S


def test_a_victim_named_by_the_thief_reads_the_steal_at_its_next_cycle(dynamodb) -> None:  # noqa: F811
    """A thief names its victim in the heartbeat that announces the steal; the victim reads the
    leases at its next cycle even within its read gap, so it stops holding the stolen lease within a
    scan (at 10,000 shards / 100 workers it held it up to the 5.7 s gap: 50 overlaps, one of them
    passed on by the thief to a third worker while the victim still held it)."""
    clock = Clock()
    seed(dynamodb, 7)
    table = table_for(dynamodb)
    long_gap = _LongGap(failover_s=SPACED.failover_s, renew_interval_s=SPACED.renew_interval_s)
    a, b = worker(dynamodb, "a", clock, timing=SPACED), worker(dynamodb, "b", clock, timing=long_gap)
    for i, lease in enumerate(sorted(table.list_leases(), key=lambda l: l.shard_id)):
        table.take_lease(lease, "a" if i < 3 else "b")
    a.run_once()
    b.run_once()  # both read: a holds 3, b holds 4; b's next lease read is 30 s away
    assert len(b.held()) == 4
    c = worker(dynamodb, "c", clock, timing=SPACED)
    stolen: list[str] = []
    while not stolen:
        for loaded in (a, b):
            loaded.renewal.renew_if_due()  # alive, but not cycling: they never hand over
        stolen = c.run_once().stolen
        clock.advance(SPACED.scan_s)
    assert clock() - b._views.read_at < long_gap.lease_read_gap_s(7, 3)  # b would not read the leases yet
    assert b.run_once().read_leases
    assert stolen[0] not in b.held()
    assert table.list_workers()["c"].notify == ("b",)
    table.heartbeat(table.list_workers()["c"], changed=True)  # an announcement of anything else
    assert table.list_workers()["c"].notify == ()  # names nobody


def test_a_hand_over_takes_cycles_not_read_gaps(dynamodb) -> None:  # noqa: F811
    """The starving worker names the worker it would steal from, which reads at once and hands a lease
    over naming it, which reads at once and takes it: each step used to wait for a read gap (5.7 s at
    10,000 shards / 100 workers: crashes took minutes to settle in the simulation)."""
    clock = Clock()
    seed(dynamodb, 7)
    table = table_for(dynamodb)
    long_gap = _LongGap(failover_s=SPACED.failover_s, renew_interval_s=SPACED.renew_interval_s)
    a, b = worker(dynamodb, "a", clock, timing=long_gap), worker(dynamodb, "b", clock, timing=long_gap)
    for i, lease in enumerate(sorted(table.list_leases(), key=lambda l: l.shard_id)):
        table.take_lease(lease, "a" if i < 3 else "b")
    a.run_once()
    b.run_once()  # both read before c exists; their next lease reads are 30 s away
    c = worker(dynamodb, "c", clock, timing=long_gap)
    stolen: list[str] = []
    for _ in range(8):
        stolen += c.run_once().stolen
        clock.advance(SPACED.scan_s)
        a.run_once()
        b.run_once()
    assert len(c.held()) == 2 and stolen == []  # floor(7/3): handed over by a cycle of each, not stolen
    assert sorted(len(w.held()) for w in (a, b, c)) == [2, 2, 3]
