"""QueryClaim waits out another query's claim by the one expiry judge, on its injected clock (in-memory table)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kinesis_src.errors import ApplicationInUseError, KinesisSourceError
from kinesis_src.leases.claim import QUERY_WORKER_ID, QueryClaim
from kinesis_src.leases.model import HeartbeatStatus, WorkerHeartbeat


class FakeTime:
    """A clock that moves only when slept on; ``on_sleep`` runs after each nap (the other query's beats)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.naps: list[float] = []
        self.on_sleep = lambda: None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds
        self.on_sleep()


class ClaimTable:
    """The claim item only: conditional take-over and release as in the lease table."""

    application, stream, table_name = "etl", "orders", "claims"

    def __init__(self, claim: WorkerHeartbeat | None) -> None:
        self.claim = claim
        self.taken_over: list[WorkerHeartbeat] = []

    def read_claim(self) -> WorkerHeartbeat | None:
        return self.claim

    def register_claim(self, holder: str) -> WorkerHeartbeat:
        self.claim = WorkerHeartbeat(holder, "mine", 0)
        return self.claim

    def renew_claim(self, claim: WorkerHeartbeat) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        return HeartbeatStatus.RENEWED, claim

    def take_over_claim(self, claim: WorkerHeartbeat) -> bool:
        if self.claim != claim:
            return False
        self.taken_over.append(claim)
        self.claim = None
        return True

    def release_claim(self, claim: WorkerHeartbeat) -> bool:
        self.claim = None
        return True


def query(table: ClaimTable, fake: FakeTime) -> QueryClaim:
    return QueryClaim(table, failover_s=30.0, renew_s=10.0, clock=fake, sleep=fake.sleep)  # type: ignore[arg-type]


def test_a_stale_claim_is_taken_over_at_the_failover_time_of_the_injected_clock() -> None:
    crashed = WorkerHeartbeat(QUERY_WORKER_ID, "crashed", 7)
    table, fake = ClaimTable(crashed), FakeTime()
    claim = query(table, fake)
    claim.acquire()
    try:
        assert table.taken_over == [crashed] and table.claim is not None and table.claim.session == "mine"
        assert fake.now == pytest.approx(30.0) and max(fake.naps) <= 0.5
    finally:
        claim.release()


def test_a_claim_that_beats_while_watched_refuses_the_second_query() -> None:
    table, fake = ClaimTable(WorkerHeartbeat(QUERY_WORKER_ID, "alive", 7)), FakeTime()

    def beat_at_ten_seconds() -> None:
        if fake.now >= 10.0 and table.claim is not None and table.claim.heartbeat == 7:
            table.claim = replace(table.claim, heartbeat=8)

    fake.on_sleep = beat_at_ten_seconds
    with pytest.raises(ApplicationInUseError, match="applicationName 'etl' is in use"):
        query(table, fake).acquire()
    assert 10.0 <= fake.now < 11.0 and table.taken_over == []


def test_a_release_while_waiting_out_another_claim_registers_nothing() -> None:
    """stop() of a query still starting: its acquire() must not register a claim after the release,
    or the claim is left unrenewed and the next query waits a failover time for nothing."""
    crashed = WorkerHeartbeat(QUERY_WORKER_ID, "crashed", 7)
    table, fake = ClaimTable(crashed), FakeTime()
    claim = query(table, fake)
    fake.on_sleep = lambda: claim.release() if fake.now >= 5.0 else None
    with pytest.raises(KinesisSourceError, match="released while the query was starting"):
        claim.acquire()
    assert table.claim == crashed and table.taken_over == []


def test_a_release_during_a_renewal_waits_for_it_and_releases_the_claim_it_wrote() -> None:
    """stop() while the renewal thread writes a heartbeat: the release must not delete the claim under the
    write (the renewal then found its claim gone and reported it taken by another query), and must remove
    the claim as the renewal left it."""
    import threading

    class SlowRenewals(ClaimTable):
        def __init__(self) -> None:
            super().__init__(None)
            self.renewing, self.go_on = threading.Event(), threading.Event()
            self.released: list[WorkerHeartbeat] = []

        def renew_claim(self, claim: WorkerHeartbeat) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
            self.renewing.set()
            assert self.go_on.wait(5), "the test never let the renewal finish"
            if self.claim is None or self.claim.session != claim.session:
                return HeartbeatStatus.DECLARED_DEAD, claim  # the item went away under the write
            self.claim = replace(claim, heartbeat=claim.heartbeat + 1)
            return HeartbeatStatus.RENEWED, self.claim

        def release_claim(self, claim: WorkerHeartbeat) -> bool:
            self.released.append(claim)
            return super().release_claim(claim)

    table = SlowRenewals()
    claim = QueryClaim(table, failover_s=30.0, renew_s=0.01)  # type: ignore[arg-type]
    claim.acquire()
    assert table.renewing.wait(5), "no renewal started"
    releasing = threading.Thread(target=claim.release)
    releasing.start()
    releasing.join(0.2)
    assert releasing.is_alive(), "release() did not wait for the renewal under way"
    table.go_on.set()
    releasing.join(5)
    assert not releasing.is_alive() and not claim.lost
    assert [c.heartbeat for c in table.released] == [1] and table.claim is None
