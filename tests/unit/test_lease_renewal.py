"""The heartbeat renews on its own schedule: a cycle stuck behind a slow or throttled read never delays it."""

from __future__ import annotations

import threading
import time

import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import AccessDeniedError
from kinesis_src.leases.coordinator import LeaseCoordinator
from kinesis_src.leases.model import Checkpoint, HeartbeatStatus, Lease
from kinesis_src.leases.renewal import RenewalMode
from kinesis_src.leases.table import LeaseTable
from kinesis_src.leases.timing import LeaseTiming
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange
from tests.waiting import wait_for

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
TIMING = LeaseTiming(failover_s=1.2, renew_interval_s=0.3)


class StuckReads(LeaseTable):
    """A lease table whose reads hang while ``stuck`` is set, as a Query retried through throttling does."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.stuck = threading.Event()
        self.released = threading.Event()
        self.waiting = threading.Event()

    def _hang(self) -> None:
        if self.stuck.is_set():
            self.waiting.set()
            self.released.wait(30)

    async def alist_workers(self, dynamodb):
        self._hang()
        return await super().alist_workers(dynamodb)

    async def ascan(self, dynamodb):
        self._hang()
        return await super().ascan(dynamodb)


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        client = DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST))
        LeaseTable(client, "leases-renewal", "app", "orders").ensure_table()
        yield client


def test_a_running_coordinator_renews_while_its_cycle_is_stuck_in_a_read(dynamodb: DynamoDBClient) -> None:
    table = StuckReads(dynamodb, "leases-renewal", "app", "orders")
    observer = LeaseTable(dynamodb, "leases-renewal", "app", "orders")
    table.create_lease(Lease("shardId-000000000000", Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
    coordinator = LeaseCoordinator(table, "w1", timing=TIMING).start(sync_now=False)
    try:
        wait_for(lambda: coordinator.held(), 5, "w1 to take the lease")
        table.stuck.set()
        wait_for(table.waiting.is_set, 5, "the cycle to hang in a read")
        beat = observer.list_workers()["w1"].heartbeat
        # three failover periods with the cycle stuck: renewals go on, the worker keeps its lease
        for _ in range(3):
            wait_for(lambda b=beat: observer.list_workers()["w1"].heartbeat >= b + 4, 5, "renewals during the stuck read")
            beat = observer.list_workers()["w1"].heartbeat
            assert coordinator.is_live() and set(coordinator.held()) == {"shardId-000000000000"}
        assert coordinator.renewal.mode is RenewalMode.OWN_SCHEDULE
    finally:
        table.released.set()
        coordinator.stop()
    assert observer.list_workers() == {}  # stop() removed the heartbeat; the renewal did not re-register


def test_run_once_without_a_thread_renews_in_the_cycle_and_reports_it(dynamodb: DynamoDBClient) -> None:
    clock = [100.0]
    table = LeaseTable(dynamodb, "leases-renewal", "app", "orders")
    coordinator = LeaseCoordinator(table, "w1", timing=TIMING, clock=lambda: clock[0])
    coordinator.register()
    clock[0] += TIMING.renew_s
    assert coordinator.run_once().heartbeat is HeartbeatStatus.RENEWED
    assert coordinator.renewal.mode is RenewalMode.IN_CYCLE
    assert coordinator.run_once().heartbeat is None  # not due yet


class FailingScan(LeaseTable):
    """A lease table whose lease reads are refused, as a role without dynamodb:Query is."""

    async def ascan(self, dynamodb):
        raise AccessDeniedError("not allowed to call dynamodb:Query (test)")


def renewal_threads(worker_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"lease-renewal-{worker_id}" and t.is_alive()]


def test_a_start_that_fails_leaves_no_renewal_running_and_no_heartbeat(dynamodb: DynamoDBClient) -> None:
    """Found by CI: a Consumer whose first lease cycle failed (no dynamodb:Query) left its renewal
    thread heartbeating for the rest of the process, retrying against a server long gone."""
    table = FailingScan(dynamodb, "leases-renewal", "app", "orders")
    observer = LeaseTable(dynamodb, "leases-renewal", "app", "orders")
    coordinator = LeaseCoordinator(table, "w-fails", timing=TIMING)
    with pytest.raises(AccessDeniedError):
        coordinator.start(sync_now=False)
    wait_for(lambda: not renewal_threads("w-fails"), 5, "the renewal thread to end")
    assert "w-fails" not in observer.list_workers()


class SlowRelease:
    """A listener whose ``before_release`` waits, as the consumer does for the in-flight batch's checkpoint."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.proceed = threading.Event()

    def on_acquired(self, lease: Lease) -> None:
        pass

    def on_lost(self, lease: Lease, reason: str) -> None:
        pass

    async def before_release(self, lease: Lease) -> None:
        self.entered.set()
        self.proceed.wait(30)


def test_stop_keeps_heartbeating_until_its_releases_are_done(dynamodb: DynamoDBClient) -> None:
    """A release slower than the failover time (the consumer waits for its in-flight batch's checkpoint)
    must not let another worker judge the stopping one dead and take its lease at the older checkpoint
    (a sticky key-range worker splitting a unit did so: duplicates). stop() used to end the renewal first."""
    table = LeaseTable(dynamodb, "leases-renewal", "app", "orders")
    table.create_lease(Lease("shardId-000000000000", Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
    listener = SlowRelease()
    stopping = LeaseCoordinator(table, "w1", timing=TIMING, listener=listener).start(sync_now=False)
    other = LeaseCoordinator(LeaseTable(dynamodb, "leases-renewal", "app", "orders"), "w2", timing=TIMING)
    stopper = threading.Thread(target=stopping.stop, name="stopper")
    declared_dead: list[str] = []
    try:
        wait_for(stopping.held, 5, "w1 to take the lease")
        other.register()
        stopper.start()
        wait_for(listener.entered.is_set, 5, "stop() to begin the release")
        deadline = time.monotonic() + 2 * TIMING.failover_s

        def two_failover_times_watched() -> bool:
            declared_dead.extend(other.run_once().declared_dead)
            return time.monotonic() > deadline

        wait_for(two_failover_times_watched, 10, "two failover times of w2 watching w1", poll_s=TIMING.scan_s)
        assert declared_dead == [] and other.held() == {}
    finally:
        listener.proceed.set()
        stopper.join(10)
        other.stop()
    assert not stopper.is_alive()
    assert table.get_lease("shardId-000000000000").owner is None  # released, then the heartbeat removed
    assert "w1" not in table.list_workers()
