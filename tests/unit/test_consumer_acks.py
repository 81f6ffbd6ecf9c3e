"""The consumer's acknowledgement rules, on a scripted Kinesis and a recording coordinator (no servers).

What is checked here is the bookkeeping the integration tests can only
sample: which write a checkpoint becomes (sequence or SHARD_END), when a
shard counts as finished, what a lost or re-acquired lease does to batches
already handed out, back-pressure, and how a release waits for the batch
in the application's hands.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, TypeVar

import pytest

from kinesis_src.consumer import Consumer, FetchPacing, parse_initial_position
from kinesis_src.errors import (
    ConfigurationError,
    LeaseLostError,
    MalformedResponseError,
)
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.positions import Position, PositionKind
from kinesis_src.records import ChildShard, RecordPage
from lineage import HashRange

T = TypeVar("T")
SHARD = "shardId-000000000001"
CHILD = ChildShard("shardId-000000000003", (SHARD,), 0, 100)


def page(seqs: list[int], *, end: bool = False, lag: int | None = 1000) -> RecordPage:
    return RecordPage(
        partition_keys=[f"k{s}" for s in seqs],
        data=[str(s).encode() for s in seqs],
        sequence_numbers=[f"{s:05d}" for s in seqs],
        arrival_epoch=[1.7e9 + s for s in seqs],
        encryption_types=[None for _ in seqs],
        next_iterator=None if end else f"it-{seqs[-1] if seqs else 'e'}",
        millis_behind_latest=lag,
        child_shards=(CHILD,) if end else (),
    )


class ScriptedKinesis:
    """Serves each shard's pages in order; an exhausted script serves empty pages (caught up)."""

    def __init__(self, pages: dict[str, list[RecordPage | Exception]]) -> None:
        self.pages = pages
        self.calls: dict[str, int] = {}
        self.starts: list[tuple[str, Position]] = []

    async def get_shard_iterator(self, stream: str, shard_id: str, position: Position) -> str:
        self.starts.append((shard_id, position))
        return "it-0"

    async def get_records(self, iterator: str, limit: int, shard_id: str, stream: str) -> RecordPage:
        self.calls[shard_id] = self.calls.get(shard_id, 0) + 1
        script = self.pages[shard_id]
        if not script:
            await asyncio.sleep(0.001)
            return page([], lag=0)
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


@dataclass
class RecordingCoordinator:
    """What the consumer asks of the lease coordinator, recorded; ``lose`` makes a shard's writes fail."""

    writes: list[tuple[str, str]] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    failure: BaseException | None = None
    live: bool = True

    def is_live(self) -> bool:
        return self.live

    def checkpoint(self, shard_id: str, checkpoint: Checkpoint) -> Lease:
        self._check(shard_id)
        self.writes.append((shard_id, str(checkpoint)))
        return lease(shard_id, checkpoint)

    def shard_ended(self, shard_id: str, children: Any) -> None:
        self._check(shard_id)
        self.writes.append((shard_id, "SHARD_END " + ",".join(c.shard_id for c in children)))

    def stop(self) -> None:
        return None

    def _check(self, shard_id: str) -> None:
        if shard_id in self.lost:
            raise LeaseLostError(f"lost {shard_id}", shard_id)


def lease(shard_id: str = SHARD, checkpoint: Checkpoint | None = None, counter: int = 1) -> Lease:
    return Lease(shard_id, checkpoint or Checkpoint.trim_horizon(), HashRange(0, 100), counter=counter, owner="me")


def make_consumer(kinesis: ScriptedKinesis, **options: Any) -> tuple[Consumer, RecordingCoordinator]:
    consumer = Consumer("orders", application_name="app", region="us-east-1", worker_id="me", **options)
    coordinator = RecordingCoordinator()
    consumer._loop = asyncio.get_running_loop()
    consumer._kinesis = kinesis  # type: ignore[assignment]
    consumer._coordinator = coordinator  # type: ignore[assignment]
    consumer.pacing = FetchPacing(idle_interval_s=0, min_interval_s=0)
    return consumer, coordinator


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 10))


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


# -- acknowledgement -----------------------------------------------------------------


def test_batches_arrive_in_order_and_the_last_checkpoint_of_a_closed_shard_ends_it() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([1, 2]), page([3]), page([4, 5], end=True)]})
        consumer, coordinator = make_consumer(kinesis)
        consumer._acquired(lease())
        seen = []
        for _ in range(3):
            batch = await consumer.__anext__()
            seen.extend(r.sequence_number for r in batch.records)
            assert all(r.shard_id == SHARD for r in batch.records)
            await batch.checkpoint()
        assert seen == ["00001", "00002", "00003", "00004", "00005"]
        assert coordinator.writes == [(SHARD, "00002"), (SHARD, "00003"), (SHARD, "SHARD_END shardId-000000000003")]
        assert consumer.held_shards() == [] and consumer.metrics.shards_ended == 1

    run(scenario)


def test_an_empty_final_page_ends_the_shard_once_everything_delivered_is_acknowledged() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([1]), page([], end=True)]})
        consumer, coordinator = make_consumer(kinesis)
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        await until(lambda: consumer._shards[SHARD].end_children is not None, "the fetcher to see SHARD_END")
        assert coordinator.writes == []  # not acknowledged yet: the children must wait
        await batch.checkpoint()
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


def test_a_closed_shard_without_records_ends_at_once() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([], end=True)]}))
        consumer._acquired(lease())
        await until(lambda: bool(coordinator.writes), "SHARD_END")
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


def test_checkpointing_an_older_batch_after_a_newer_one_never_moves_back() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([1]), page([2])]}), prefetch_batches=2)
        consumer._acquired(lease())
        first = await consumer.__anext__()
        second = await consumer.__anext__()
        await second.checkpoint()
        await first.checkpoint()
        assert coordinator.writes == [(SHARD, "00002")]

    run(scenario)


def test_checkpoint_after_the_lease_was_lost_raises_and_writes_nothing() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([1]), page([2])]}))
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        consumer._lost(lease(), "taken by w2")
        with pytest.raises(LeaseLostError) as raised:
            await batch.checkpoint()
        assert raised.value.shard_id == SHARD and "no longer holds" in str(raised.value)
        assert coordinator.writes == [] and consumer.metrics.leases_lost == 1

    run(scenario)


def test_a_fenced_checkpoint_write_drops_the_shard() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([1])]}))
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        coordinator.lost.add(SHARD)  # the table's condition fails: someone else took it
        with pytest.raises(LeaseLostError):
            await batch.checkpoint()
        assert consumer.held_shards() == []

    run(scenario)


def test_a_batch_from_an_earlier_holding_cannot_checkpoint_the_new_one() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([1])]})
        consumer, coordinator = make_consumer(kinesis)
        consumer._acquired(lease(counter=1))
        old = await consumer.__anext__()
        consumer._lost(lease(counter=1), "taken")
        kinesis.pages[SHARD] = [page([1])]  # the shard read again from its checkpoint
        consumer._acquired(lease(checkpoint=Checkpoint.trim_horizon(), counter=3))
        new = await consumer.__anext__()
        with pytest.raises(LeaseLostError):
            await old.checkpoint()
        await new.checkpoint()
        assert coordinator.writes == [(SHARD, "00001")]

    run(scenario)


def test_a_new_holder_resumes_after_the_checkpoint() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([8])]})
        consumer, _ = make_consumer(kinesis)
        consumer._acquired(lease(checkpoint=Checkpoint.sequence("00007")))
        await consumer.__anext__()
        assert kinesis.starts == [(SHARD, Position.after_sequence("00007"))]

    run(scenario)


# -- back-pressure, release, failure, stop ----------------------------------------------


def test_prefetch_bounds_how_far_fetching_runs_ahead_of_the_application() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([i]) for i in range(1, 20)]})
        consumer, _ = make_consumer(kinesis, prefetch_batches=2)
        consumer._acquired(lease())
        await until(lambda: kinesis.calls.get(SHARD, 0) >= 3, "the fetcher to fill its slots")
        for _ in range(20):  # scheduler turns: a fetcher not held back would fetch again in these
            await asyncio.sleep(0)
        assert consumer._shards[SHARD].slots.locked()
        assert kinesis.calls[SHARD] == 3  # two batches queued, the third page waits for a slot
        await consumer.__anext__()
        await until(lambda: kinesis.calls[SHARD] == 4, "one more fetch after one delivery")

    run(scenario)


def test_release_waits_for_the_batch_in_hand_to_be_checkpointed_and_drops_the_rest() -> None:
    async def scenario() -> None:
        kinesis = ScriptedKinesis({SHARD: [page([1]), page([2])]})
        consumer, coordinator = make_consumer(kinesis, prefetch_batches=2)
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        await until(lambda: consumer._queue.qsize() == 1, "the second batch to be queued")
        release = asyncio.create_task(consumer._prepare_release(SHARD))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not release.done()  # still waiting for the batch in hand
        await batch.checkpoint()
        await asyncio.wait_for(release, 1)
        assert coordinator.writes == [(SHARD, "00001")] and consumer.metrics.leases_released == 1
        consumer.stop()
        with pytest.raises(StopAsyncIteration):
            await consumer.__anext__()  # the queued batch 2 was dropped, not delivered

    run(scenario)


def test_release_gives_up_waiting_after_the_timeout() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([1])]}), release_timeout_s=0.05)
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        await asyncio.wait_for(consumer._prepare_release(SHARD), 1)
        with pytest.raises(LeaseLostError):
            await batch.checkpoint()
        assert coordinator.writes == []

    run(scenario)


def test_nothing_is_delivered_while_the_worker_cannot_trust_its_own_leases() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(ScriptedKinesis({SHARD: [page([1]), page([2])]}), prefetch_batches=2)
        coordinator.live = False  # heartbeat overdue: others may have declared this worker dead
        consumer._acquired(lease())
        await until(lambda: consumer._queue.qsize() == 2, "both batches to be queued")
        waiting = asyncio.create_task(consumer.__anext__())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        coordinator.live = True  # the heartbeat went through after all
        batch = await asyncio.wait_for(waiting, 1)
        assert batch.last_sequence_number == "00001"
        coordinator.live = False
        waiting = asyncio.create_task(consumer.__anext__())
        consumer._lost(lease(), "this worker was declared dead")  # ... or it was declared dead
        coordinator.live = True
        consumer.stop()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 1)  # batch 2 belonged to the lost lease: never delivered

    run(scenario)


def test_a_fetch_error_no_retry_can_fix_reaches_the_application() -> None:
    async def scenario() -> None:
        bad = MalformedResponseError("GetRecords response body is not the documented shape")
        consumer, _ = make_consumer(ScriptedKinesis({SHARD: [bad]}))
        consumer._acquired(lease())
        with pytest.raises(MalformedResponseError):
            await consumer.__anext__()

    run(scenario)


def test_stop_ends_the_iteration_and_metrics_count_what_was_delivered() -> None:
    async def scenario() -> None:
        consumer, _ = make_consumer(ScriptedKinesis({SHARD: [page([1, 2, 3], lag=250)]}))
        consumer._acquired(lease())
        batch = await consumer.__anext__()
        assert len(batch) == 3 and batch.millis_behind_latest == 250
        table = batch.to_arrow()
        assert table.column("sequenceNumber").to_pylist() == ["00001", "00002", "00003"]
        assert set(table.column("stream").to_pylist()) == {"orders"}
        consumer.stop()
        with pytest.raises(StopAsyncIteration):
            await consumer.__anext__()
        m = consumer.metrics.snapshot()
        assert (m.records, m.batches, m.leases_taken, m.leases_held) == (3, 1, 1, 1)
        assert m.shards[SHARD].records == 3 and "3 records" in m.summary()

    run(scenario)


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, kind",
    [
        ("trim_horizon", PositionKind.TRIM_HORIZON),
        ("EARLIEST", PositionKind.TRIM_HORIZON),
        ("latest", PositionKind.LATEST),
        ("2026-01-02T03:04:05Z", PositionKind.AT_TIMESTAMP),
        (datetime(2026, 1, 2, tzinfo=timezone.utc), PositionKind.AT_TIMESTAMP),
    ],
)
def test_initial_positions(value: Any, kind: PositionKind) -> None:
    assert parse_initial_position(value).kind is kind


@pytest.mark.parametrize("value", ["yesterday", 42, Position.after_sequence("1")])
def test_bad_initial_position_is_named(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="initial_position"):
        parse_initial_position(value)


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"application_name": "bad name!"}, "application_name"),
        ({"application_name": "a", "max_records_per_fetch": 0}, "max_records_per_fetch"),
        ({"application_name": "a", "prefetch_batches": 0}, "prefetch_batches"),
        ({"application_name": "a", "region": ""}, "region"),
    ],
)
def test_bad_options_are_named(options: dict[str, Any], fragment: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    options.setdefault("region", "us-east-1")
    with pytest.raises(ConfigurationError, match=fragment):
        Consumer("orders", **options)


def test_pacing_stays_within_kinesis_limits() -> None:
    pacing = FetchPacing(idle_interval_s=1.0)
    assert pacing.delay(100, 1000, 5000, elapsed_s=0.05) == pytest.approx(0.15)  # 5 calls/s
    assert pacing.delay(10_000, 4 * 1024 * 1024, 5000, elapsed_s=0.5) == pytest.approx(1.5)  # 2 MB/s
    assert pacing.delay(0, 0, 0, elapsed_s=0.1) == pytest.approx(0.9)  # caught up: idle
    assert pacing.delay(5, 1000, 0, elapsed_s=0.1, limit=10) == pytest.approx(0.9)
    assert pacing.delay(10, 1000, 0, elapsed_s=0.1, limit=10) == pytest.approx(0.1)  # a full page is not caught up
    assert pacing.delay(100, 1000, 5000, elapsed_s=3) == 0.0
