"""LeaseCoordinator on moto with a fake monotonic clock: balancing, expiry, fencing, self-doubt."""

from __future__ import annotations

import time

import boto3
import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import (
    CorruptLeaseError,
    LeaseLostError,
    ThrottledError,
    WorkerIdInUseError,
)
from kinesis_src.leases.claim import QueryClaim
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.in_place import run_sync
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.records import ChildShard
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0)
FULL = HashRange(0, MAX_HASH_KEY)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_acquired(self, lease: Lease) -> None:
        self.events.append(("acquired", lease.shard_id))

    def on_lost(self, lease: Lease, reason: str) -> None:
        self.events.append(("lost", lease.shard_id))

    async def before_release(self, lease: Lease) -> None:
        self.events.append(("before_release", lease.shard_id))


def sid(i: int) -> str:
    return f"shardId-{i:012d}"


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))
        LeaseTable(client, "leases-unit", "app", "orders").ensure_table()
        yield client


def table_for(dynamodb: DynamoDBClient, now_ms=None) -> LeaseTable:
    table = LeaseTable(dynamodb, "leases-unit", "app", "orders")
    if now_ms is not None:
        table.now_ms = now_ms
    return table


def seed(dynamodb: DynamoDBClient, count: int, parents: dict[int, tuple[int, ...]] | None = None) -> None:
    table = table_for(dynamodb)
    for i in range(count):
        ps = tuple(sid(p) for p in (parents or {}).get(i, ()))
        table.create_lease(Lease(sid(i), Checkpoint.trim_horizon(), FULL, parent_shard_ids=ps))


def worker(dynamodb: DynamoDBClient, name: str, clock: Clock, **kwargs) -> LeaseCoordinator:
    kwargs.setdefault("timing", TIMING)
    coordinator = LeaseCoordinator(table_for(dynamodb, kwargs.pop("now_ms", None)), name, clock=clock, **kwargs)
    coordinator.register()
    return coordinator


def owners(dynamodb: DynamoDBClient) -> dict[str, str | None]:
    return {l.shard_id: l.owner for l in table_for(dynamodb).list_leases()}


def cycle(workers: list[LeaseCoordinator], clock: Clock, rounds: int = 1, step: float = 1.0) -> None:
    for _ in range(rounds):
        for w in workers:
            w.run_once()
        clock.advance(step)


def test_workers_share_leases_fairly_and_shed_when_others_join(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 10)
    clock = Clock()
    a = worker(dynamodb, "a", clock, listener=(rec := Recorder()))
    a.run_once()
    assert len(a.held()) == 10 and ("acquired", sid(0)) in rec.events
    b, c = worker(dynamodb, "b", clock), worker(dynamodb, "c", clock)
    cycle([a, b, c], clock, rounds=3)
    counts = sorted(len(w.held()) for w in (a, b, c))
    assert counts == [3, 3, 4]
    assert all(owner in ("a", "b", "c") for owner in owners(dynamodb).values())
    assert ("before_release", sid(9)) in rec.events  # shedding is graceful: the listener checkpoints first


def test_a_silent_worker_expires_by_observation_and_its_checkpoints_are_fenced(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 4)
    clock = Clock()
    a, b = worker(dynamodb, "a", clock), worker(dynamodb, "b", clock)
    cycle([a, b], clock, rounds=2)
    b_leases = b.held()
    assert len(b_leases) == 2
    shard = next(iter(b_leases))
    b.checkpoint(shard, Checkpoint.sequence("111"))
    # b stops running; a keeps cycling. Not yet expired just before failover...
    for _ in range(2):
        a.run_once()
        clock.advance(1.0)
    assert len(a.held()) == 2
    clock.advance(1.5)
    report = a.run_once()
    assert report.declared_dead == ["b"] and len(a.held()) == 4
    assert a.lease(shard).checkpoint == Checkpoint.sequence("111")  # resumes at b's checkpoint
    # b wakes up: it knows its own heartbeat is overdue, so it trusts none of its leases...
    assert not b.is_live() and b.held() == {}
    before = table_for(dynamodb).get_lease(shard)
    with pytest.raises(LeaseLostError):
        b.checkpoint(shard, Checkpoint.sequence("222"))
    assert table_for(dynamodb).get_lease(shard) == before
    # ...and its next cycle learns it was declared dead, registers again and rebalances.
    report = b.run_once()
    assert report.heartbeat is HeartbeatStatus.DECLARED_DEAD
    cycle([a, b], clock, rounds=3)
    assert sorted([len(a.held()), len(b.held())]) == [2, 2]


def test_wall_clock_skew_never_expires_a_live_worker(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 4)
    clock = Clock()
    past = worker(dynamodb, "past", clock, now_ms=lambda: 0)  # wall clock at 1970
    future = worker(dynamodb, "future", clock, now_ms=lambda: 4_102_444_800_000)  # 2100
    for _ in range(12):
        reports = [past.run_once(), future.run_once()]
        assert not any(r.declared_dead or r.lost for r in reports)
        clock.advance(1.0)
    assert sorted([len(past.held()), len(future.held())]) == [2, 2]


def test_a_slow_heartbeat_cannot_be_declared_dead_after_it_landed(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 2)
    clock = Clock()
    a, b = worker(dynamodb, "a", clock), worker(dynamodb, "b", clock)
    cycle([a, b], clock)
    stale = table_for(dynamodb).scan().workers["b"]
    clock.advance(1.0)
    b.run_once()  # lands after a's observation
    assert not table_for(dynamodb).declare_worker_dead(stale)


def test_restart_with_the_same_worker_id_adopts_and_fences_the_old_process(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 3)
    clock = Clock()
    old = worker(dynamodb, "w", clock)
    old.run_once()
    held = old.held()
    new = worker(dynamodb, "w", clock)
    clock.advance(1.0)
    report = new.run_once()
    assert sorted(report.acquired) == sorted(held)  # adopted with a conditional take: counter + 1
    for shard, lease in held.items():
        assert table_for(dynamodb).get_lease(shard).counter == lease.counter + 1
    with pytest.raises(LeaseLostError):
        old.checkpoint(sid(0), Checkpoint.sequence("5"))
    with pytest.raises(WorkerIdInUseError, match="'w'"):
        old.run_once()


def test_children_are_assigned_only_after_all_parents_end(dynamodb: DynamoDBClient) -> None:
    # 0 and 1 are merged into 2
    seed(dynamodb, 3, parents={2: (0, 1)})
    clock = Clock()
    a = worker(dynamodb, "a", clock)
    a.run_once()
    assert sorted(a.held()) == [sid(0), sid(1)]
    child = ChildShard(sid(2), (sid(0), sid(1)), 0, MAX_HASH_KEY)
    first = a.shard_ended(sid(0), [child])
    assert first.created_children == () and first.existing_children == (sid(2),)
    a.run_once()
    assert sorted(a.held()) == [sid(1)]
    a.shard_ended(sid(1), [child])
    report = a.run_once()
    assert report.acquired == [sid(2)] and sorted(a.held()) == [sid(2)]


def test_order_can_be_turned_off(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 2, parents={1: (0,)})
    clock = Clock()
    a = worker(dynamodb, "a", clock, preserve_shard_order=False)
    a.run_once()
    assert sorted(a.held()) == [sid(0), sid(1)]


def test_stop_releases_gracefully_and_removes_the_heartbeat(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 2)
    clock = Clock()
    a = worker(dynamodb, "a", clock, listener=(rec := Recorder()))
    a.run_once()
    a.stop()
    assert set(owners(dynamodb).values()) == {None}
    assert table_for(dynamodb).scan().workers == {}
    assert sorted(e for e in rec.events if e[0] == "before_release") == [("before_release", sid(0)), ("before_release", sid(1))]


def test_a_corrupt_item_stops_the_coordinator_loudly(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 2)
    clock = Clock()
    a = worker(dynamodb, "a", clock, listener=(rec := Recorder()))
    a.run_once()
    table = table_for(dynamodb)
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName="leases-unit", Key=table._lease_key(sid(1)),
        UpdateExpression="SET leaseCounter = :s", ExpressionAttributeValues={":s": {"S": "one"}},
    )
    with pytest.raises(CorruptLeaseError, match=r"shard#shardId-000000000001.*'leaseCounter' has type S"):
        a.run_once()
    assert run_sync(a._cycle_step()) is None  # the running coordinator's step: records the failure, drops every lease
    assert isinstance(a.failure, CorruptLeaseError) and a.held() == {}
    assert ("lost", sid(0)) in rec.events


def test_a_steal_is_requested_first_and_forced_only_failover_s_after_the_request(dynamodb: DynamoDBClient) -> None:
    # issue #23: the thief used to take the lease by force once its patience ran out
    seed(dynamodb, 4)
    clock = Clock()
    table = table_for(dynamodb)
    a = worker(dynamodb, "a", clock)
    a.run_once()
    b = worker(dynamodb, "b", clock)
    # "a" is alive (its heartbeat moves) but does not cycle: an older version, or its scans stall
    assert b.run_once().requested == []
    clock.advance(1.0)
    assert b.run_once().requested == []
    clock.advance(1.0)
    report = b.run_once()  # after 1.5 renewals of patience: a request, not a steal
    assert report.stolen == [] and len(report.requested) == 1 and report.announced
    shard = report.requested[0]
    held = a.lease(shard)
    requested = table.get_lease(shard)
    assert (requested.owner, requested.counter, requested.steal_requested_by) == ("a", held.counter, "b")
    assert a.checkpoint(shard, Checkpoint.sequence("7")).steal_requested_by == "b"  # still a's to write
    asked_at, stolen = clock(), []
    while not stolen:
        clock.advance(TIMING.scan_s)
        a.renewal.renew_if_due()
        report = b.run_once()
        stolen = report.stolen
        assert report.requested == []  # one request at a time
    assert stolen == [shard] and clock() - asked_at >= TIMING.failover_s
    assert not a.view_is_fresh()  # so "a" has delivered nothing from it since long before the steal
    taken = table.get_lease(shard)
    assert (taken.owner, taken.steal_requested_by, taken.checkpoint) == ("b", None, Checkpoint.sequence("7"))
    # When the victim does cycle, it hands one more over gracefully and nothing more is stolen.
    a.run_once()
    clock.advance(1.0)
    report = b.run_once()
    assert report.stolen == [] and len(b.held()) == 2


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="CLOCK_BOOTTIME exists on Linux only")
def test_the_default_clock_keeps_counting_through_host_suspend(dynamodb: DynamoDBClient, monkeypatch) -> None:
    """CLOCK_MONOTONIC stops while the host is suspended: a worker resumed after a suspend longer
    than the failover time would still trust leases others took. CLOCK_BOOTTIME keeps counting."""
    asked: list[int] = []
    real = time.clock_gettime

    def spy(clock_id: int) -> float:
        asked.append(clock_id)
        return real(clock_id)

    monkeypatch.setattr(time, "clock_gettime", spy)
    coordinator = LeaseCoordinator(table_for(dynamodb), "a", timing=TIMING)
    claim = QueryClaim(table_for(dynamodb))
    for clock in (coordinator.clock, claim.clock):
        asked.clear()
        assert clock() == pytest.approx(real(time.CLOCK_BOOTTIME), abs=1.0)
        assert asked == [time.CLOCK_BOOTTIME]


def test_the_view_is_fresh_only_within_the_steal_patience_after_a_scan_that_answered(dynamodb) -> None:
    """A victim that cannot read the table cannot see a steal coming: its view goes stale before a
    thief's patience (1.5 renewals) runs out, and only a scan that answers makes it fresh again."""
    clock = Clock()
    seed(dynamodb, 2)
    a = worker(dynamodb, "a", clock)
    assert not a.view_is_fresh()  # never scanned
    a.run_once()
    assert a.view_is_fresh()
    clock.advance(1.4)
    assert a.view_is_fresh()
    clock.advance(0.2)  # 1.6 s > 1.5 renewals of 1 s
    assert not a.view_is_fresh()
    failing = a.table.alist_workers

    async def throttled(dynamodb: object) -> dict:
        raise ThrottledError("throttled")

    a.table.alist_workers = throttled  # type: ignore[method-assign]
    with pytest.raises(ThrottledError):
        a.run_once()
    assert not a.view_is_fresh()  # a scan that failed does not count
    a.table.alist_workers = failing  # type: ignore[method-assign]
    a.run_once()
    assert a.view_is_fresh()


# -- reading the table: heartbeats every cycle, leases when a change was announced ------------------


def queries(dynamodb: DynamoDBClient, run) -> int:
    before = dynamodb.requests["Query"]
    run()
    return dynamodb.requests["Query"] - before


def test_an_idle_cycle_reads_the_heartbeats_only(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 6)
    clock = Clock()
    a, b = worker(dynamodb, "a", clock), worker(dynamodb, "b", clock)
    cycle([a, b], clock, rounds=3)
    assert sorted(len(w.held()) for w in (a, b)) == [3, 3]
    report = a.run_once()
    assert not report.read_leases and not report.announced
    assert queries(dynamodb, a.run_once) == 1  # the worker# items only


def test_an_announced_steal_is_seen_by_the_victim_at_its_next_cycle(dynamodb: DynamoDBClient) -> None:
    """The thief's heartbeat announces the steal (leaseChanges + 1): the victim reads the leases at
    once, long before the periodic re-read, and drops the stolen lease."""
    seed(dynamodb, 4)
    clock = Clock()
    a = worker(dynamodb, "a", clock, timing=LeaseTiming(failover_s=3.0, renew_interval_s=1.0,
                                                         lease_refresh_interval_s=1000.0))
    assert a.run_once().announced  # its own takes
    assert a.run_once().read_leases and not a.run_once().read_leases
    b = worker(dynamodb, "b", clock)
    report = b.run_once()
    while not report.stolen:  # "a" renews but does not cycle, so it cannot shed: "b" asks, then steals
        clock.advance(1.0)
        a.renewal.renew_if_due()
        report = b.run_once()
    assert len(report.stolen) == 1 and report.announced
    seen = a.run_once()
    assert seen.read_leases and seen.lost == report.stolen


def test_an_unannounced_change_is_seen_at_the_periodic_re_read(dynamodb: DynamoDBClient) -> None:
    """A worker of an older version never announces: its steal is seen within lease_refresh_interval_s.
    Until then the victim's view is old, and the fence still holds: its checkpoint is rejected."""
    seed(dynamodb, 3)
    clock = Clock()
    table = table_for(dynamodb)
    old = table.register_worker("old-version")
    table.take_lease(table.get_lease(sid(2)), "old-version")
    a = worker(dynamodb, "a", clock, timing=LeaseTiming(failover_s=3.0, renew_interval_s=1.0,
                                                         lease_refresh_interval_s=2.0))
    cycle([a], clock, rounds=2, step=0.5)
    assert sorted(a.held()) == [sid(0), sid(1)] and not a.run_once().read_leases
    assert table.take_lease(table.get_lease(sid(1)), "old-version") is not None  # a steal, not announced
    old = table.heartbeat(old)[1]
    clock.advance(0.5)
    assert not a.run_once().read_leases and sid(1) in a.held()  # not seen yet
    with pytest.raises(LeaseLostError):  # but fenced: no write on the old view
        a.table.checkpoint(a.lease(sid(1)), Checkpoint.sequence("1"))
    clock.advance(1.5)
    table.heartbeat(old)
    report = a.run_once()
    assert report.read_leases and report.lost == [sid(1)] and sorted(a.held()) == [sid(0)]


def test_a_zero_refresh_interval_reads_the_leases_every_cycle(dynamodb: DynamoDBClient) -> None:
    seed(dynamodb, 2)
    clock = Clock()
    a = worker(dynamodb, "a", clock, timing=LeaseTiming(failover_s=3.0, renew_interval_s=1.0,
                                                         lease_refresh_interval_s=0.0))
    cycle([a], clock, rounds=2)
    assert all(a.run_once().read_leases for _ in range(3))


def test_a_heartbeat_item_of_an_older_version_counts_as_a_live_worker(dynamodb: DynamoDBClient) -> None:
    """Items written before leaseChanges existed: a worker of the previous version shares the leases."""
    seed(dynamodb, 4)
    clock = Clock()
    old = table_for(dynamodb).register_worker("old")
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName="leases-unit", Key=table_for(dynamodb)._worker_key("old"))["Item"]
    assert "leaseChanges" not in item
    a = worker(dynamodb, "a", clock)
    a.run_once()
    assert len(a.held()) == 2 and table_for(dynamodb).list_workers()["old"] == old


def test_child_leases_created_by_another_worker_are_seen_at_its_announcement(dynamodb: DynamoDBClient) -> None:
    """Both workers read only heartbeats when idle; b ends its shard (a consumer thread's SHARD_END),
    announces it at its next cycle (taking both children: 3 leases, it had none), and a reads the
    leases at its next cycle instead of at the periodic re-read."""
    seed(dynamodb, 2)
    clock = Clock()
    slow = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, lease_refresh_interval_s=1000.0)
    a, b = worker(dynamodb, "a", clock, timing=slow), worker(dynamodb, "b", clock, timing=slow)
    cycle([a, b], clock, rounds=3)
    assert not any(w.run_once().read_leases for w in (a, b))
    ended = next(iter(b.held()))
    b.shard_ended(ended, [ChildShard(sid(10), (ended,), 0, 2**127 - 1), ChildShard(sid(11), (ended,), 2**127, MAX_HASH_KEY)])
    assert b.run_once().announced
    assert a.run_once().read_leases
    assert sorted(len(w.held()) for w in (a, b)) == [1, 2]


# -- throughput-aware balancing ---------------------------------------------------------------------


def test_reported_throughput_rides_on_checkpoints_and_a_hot_shard_gets_a_worker_of_its_own(dynamodb) -> None:
    """Four shards, one ten times hotter: by count a/b hold 2/2. The estimates are written with the
    checkpoints (no announcement, no extra write); once the periodic re-read shows them, the hot
    shard's holder gives its other lease away: one release and one take, then nothing moves."""
    seed(dynamodb, 4)
    clock = Clock()
    a, b = worker(dynamodb, "a", clock), worker(dynamodb, "b", clock)
    cycle([a, b], clock, rounds=3)
    assert sorted(len(w.held()) for w in (a, b)) == [2, 2]
    holder = {shard: w for w in (a, b) for shard in w.held()}
    assert a.checkpoint(next(iter(a.held())), Checkpoint.sequence("1")).throughput is None  # meter too young
    for _ in range(12):  # shard 0 delivers 1,000 records/s, the others 100
        for shard, w in holder.items():
            hot = shard == sid(0)
            w.report_throughput(shard, 1000 if hot else 100, 100_000 if hot else 10_000)
        clock.advance(1.0)
    rates = {shard: w.checkpoint(shard, Checkpoint.sequence("2")).throughput for shard, w in holder.items()}
    assert all(r is not None for r in rates.values())
    cold = [r.records_per_s for s, r in rates.items() if s != sid(0)]  # type: ignore[union-attr]
    assert rates[sid(0)].records_per_s == pytest.approx(10 * cold[0], rel=0.01)  # type: ignore[union-attr]
    moves: list[str] = []
    for _ in range(int(TIMING.lease_refresh_interval_s) + 5):
        for w in (a, b):
            report = w.run_once()
            moves += report.released + report.acquired
        clock.advance(1.0)
    assert sorted(holder[sid(0)].held()) == [sid(0)] and len(moves) == 2


def test_a_worker_that_registers_between_the_heartbeat_and_lease_reads_is_not_taken_as_dead(dynamodb) -> None:
    """The heartbeats are read before the leases: a worker that registers and takes a lease in between
    owns a lease in the view without a heartbeat in the first read. It must not count as dead."""
    seed(dynamodb, 2)
    clock = Clock()
    a = worker(dynamodb, "a", clock)
    read_heartbeats = a.table.alist_workers

    async def late_worker_just_after(client: object) -> dict:
        heartbeats = await read_heartbeats(client)
        other = table_for(dynamodb)
        other.register_worker("late")
        other.take_lease(other.get_lease(sid(1)), "late")
        a.table.alist_workers = read_heartbeats  # type: ignore[method-assign]
        return heartbeats

    a.table.alist_workers = late_worker_just_after  # type: ignore[method-assign]
    report = a.run_once()
    assert "late" in report.live_workers and sid(1) not in report.acquired
    assert owners(dynamodb) == {sid(0): "a", sid(1): "late"}


def test_steal_patience_restarts_while_hand_overs_progress(dynamodb: DynamoDBClient) -> None:
    # issue #12: a starving worker stole once its wish to steal had lasted 1.5 renewals, even while the
    # loaded workers were handing leases over to it, one per cycle of theirs; patience now restarts at
    # every take. N=9, W=4: "d" needs 2, and "c" then "b" each hand one over, every other second.
    seed(dynamodb, 9)
    clock = Clock()
    givers = [worker(dynamodb, name, clock) for name in ("a", "b", "c")]
    cycle(givers, clock, rounds=2)
    assert sorted(len(w.held()) for w in givers) == [3, 3, 3]
    d = worker(dynamodb, "d", clock)
    stolen, handed = [], []
    for round_no in range(6):
        stolen += d.run_once().stolen
        if round_no % 2 == 0:
            handed += [shard for w in givers for shard in w.run_once().released]
        clock.advance(TIMING.renew_s)
    assert stolen == []
    assert len(handed) == 2 and len(d.held()) == 2


class SlowReads(LeaseTiming):
    """Lease reads at least 100 s apart, as lease_read_gap_s makes them at 10,000 leases x 100 workers."""

    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        return 100.0


def test_a_cached_view_from_before_its_own_takes_does_not_drop_them(dynamodb: DynamoDBClient) -> None:
    # issue #12: with lease reads spaced out at scale, a cycle reconciled its held set against leases
    # read before its own takes, saw them unowned and dropped every one (the simulation at 10,000/100
    # counted each lease taken twice); a view older than the worker's own write now counts for nothing
    seed(dynamodb, 4)
    clock = Clock()
    a = worker(dynamodb, "a", clock, timing=SlowReads(failover_s=3.0, renew_interval_s=1.0))
    assert len(a.run_once().acquired) == 4
    clock.advance(1.0)
    report = a.run_once()
    assert not report.read_leases  # the cached view still shows the four leases unowned
    assert report.lost == [] and report.acquired == [] and len(a.held()) == 4
    assert a.checkpoint(sid(0), Checkpoint.sequence("5")).owner == "a"  # still fenced on its own counter
