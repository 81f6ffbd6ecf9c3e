"""The consumer's acknowledgement rules, on the shared fake Kinesis and a recording coordinator (no servers).

What is checked here is the bookkeeping the integration tests can only
sample: which write a checkpoint becomes (sequence or SHARD_END), when a
shard counts as finished, what a lost or re-acquired lease does to batches
already handed out, back-pressure, and how a release waits for the batch
in the application's hands.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from consumer_harness import (
    RecordingCoordinator,
    make_consumer,
    make_lease,
    only,
    run,
    take,
    until,
    watch_ends,
)
from fake_kinesis import FakeKinesis, Gate
from kpl import aggregate

from kinesis_src.consumer import Consumer, FetchPacing, parse_initial_position
from kinesis_src.consumer.shard_state import ShardPhase
from kinesis_src.errors import (
    ConfigurationError,
    DataLossError,
    LeaseLostError,
    MalformedResponseError,
    RetriesExhaustedError,
    ThrottledError,
)
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.positions import Position, PositionKind
from lineage import HashRange

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

T = TypeVar("T")
SHARD = "shardId-000000000001"
OTHER = "shardId-000000000002"


Page = list[int | tuple[int, int]]  # sequence numbers; (sequence number, n): a KPL aggregate of n user records


def scripted(pages: dict[str, list[Page]], *, ends: bool = False, end_apart: bool = False) -> FakeKinesis:
    """Stream "orders" on the shared fake Kinesis, each shard holding the records of its ``pages``,
    one page per GetRecords, then empty pages (caught up). With ``ends`` SHARD is closed (its child is
    shard 3): the page of its last records ends it, or an empty page after them with ``end_apart``."""
    child = listing(3, 0, 100, (1,))
    fake = FakeKinesis()
    fake.create_stream("orders", listing=[listing(1, 0, 100, ending="99999" if ends else None),
                                          listing(2, 101, 200), *([child] if ends else [])])
    for sid, shard_pages in pages.items():
        for record in (r for p in shard_pages for r in p):
            seq, users = record if isinstance(record, tuple) else (record, 0)
            data = aggregate([(f"k{seq}.{sub}", None, f"{seq}.{sub}".encode()) for sub in range(users)]) if users else b"%d" % seq
            fake.put_record("orders", f"k{seq}", data, shard_id=sid, sequence_number=f"{seq:05d}", arrival=1.7e9 + seq)
        fake.shard("orders", sid).page_sizes = [len(p) for p in shard_pages]
    fake.shard("orders", SHARD).end_page_apart = end_apart
    return fake


def starts(kinesis: FakeKinesis) -> list[tuple[str, Position]]:
    """Where the consumer asked for iterators."""
    return [(c.shard_id, c.position) for c in kinesis.calls_to("get_shard_iterator")]


def lease(shard_id: str = SHARD, checkpoint: Checkpoint | None = None, counter: int = 1) -> Lease:
    return make_lease(shard_id, checkpoint, counter, HashRange(0, 100))



# -- acknowledgement -----------------------------------------------------------------


def test_batches_arrive_in_order_and_the_last_checkpoint_of_a_closed_shard_ends_it() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1, 2], [3], [4, 5]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        seen = []
        for _ in range(3):
            batch = await consumer.__anext__()
            seen.extend(r.sequence_number for r in batch.records)
            assert all(r.shard_id == SHARD for r in batch.records)
            await batch.checkpoint()
        assert seen == ["00001", "00002", "00003", "00004", "00005"]
        assert coordinator.writes == [(SHARD, "00002"), (SHARD, "00003"), (SHARD, "SHARD_END shardId-000000000003")]
        assert consumer.held_shards() == [] and consumer.metrics.shards_ended == 1
        assert consumer.metrics.checkpoints == 3 and consumer.metrics.checkpoint_write_us > 0  # the writes' time

    run(scenario)


def test_an_empty_final_page_ends_the_shard_once_everything_delivered_is_acknowledged() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]]}, ends=True, end_apart=True)
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        await until(lambda: only(consumer).holdings.get(SHARD).state.phase is ShardPhase.END_SEEN, "the fetcher to see SHARD_END")
        assert coordinator.writes == []  # not acknowledged yet: the children must wait
        await batch.checkpoint()
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


def test_a_closed_shard_without_records_ends_at_once() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({}, ends=True))
        take(only(consumer), lease())
        await until(lambda: bool(coordinator.writes), "SHARD_END")
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


def test_checkpointing_an_older_batch_after_a_newer_one_never_moves_back() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1], [2]]}), prefetch_batches=2)
        take(only(consumer), lease())
        first = await consumer.__anext__()
        second = await consumer.__anext__()
        await second.checkpoint()
        await first.checkpoint()
        assert coordinator.writes == [(SHARD, "00002")]

    run(scenario)


def test_checkpoint_after_the_lease_was_lost_raises_and_writes_nothing() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1], [2]]}))
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        only(consumer).on_lost(lease(), "taken by w2")
        with pytest.raises(LeaseLostError) as raised:
            await batch.checkpoint()
        assert raised.value.shard_id == SHARD and "no longer holds" in str(raised.value)
        assert coordinator.writes == [] and consumer.metrics.leases_lost == 1

    run(scenario)


def test_a_fenced_checkpoint_write_drops_the_shard() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]]}))
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        coordinator.lost.add(SHARD)  # the table's condition fails: someone else took it
        with pytest.raises(LeaseLostError):
            await batch.checkpoint()
        assert consumer.held_shards() == []

    run(scenario)


def test_a_batch_from_an_earlier_holding_cannot_checkpoint_the_new_one() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]]})
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease(counter=1))
        old = await consumer.__anext__()
        only(consumer).on_lost(lease(counter=1), "taken")
        # the shard is read again from its checkpoint: record 1 again
        take(only(consumer), lease(checkpoint=Checkpoint.trim_horizon(), counter=3))
        new = await consumer.__anext__()
        with pytest.raises(LeaseLostError):
            await old.checkpoint()
        await new.checkpoint()
        assert coordinator.writes == [(SHARD, "00001")]

    run(scenario)


def test_a_new_holder_resumes_after_the_checkpoint() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[8]]})
        consumer, _ = make_consumer(kinesis)
        take(only(consumer), lease(checkpoint=Checkpoint.sequence("00007")))
        await consumer.__anext__()
        # A checkpoint names the last user record processed: read AT it, drop it (the KCL's way).
        assert starts(kinesis) == [(SHARD, Position.after_sequence("00007", 0))]
        assert Position.after_sequence("00007", 0).iterator_args()["ShardIteratorType"] == "AT_SEQUENCE_NUMBER"

    run(scenario)


# -- checkpoints inside a KPL aggregate (issue #10) ---------------------------------------


def test_a_checkpoint_at_a_record_inside_an_aggregate_names_its_sub_sequence_number() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1, (2, 3)]]})
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        await batch.checkpoint(batch.records[2])
        await batch.checkpoint(batch.records[1])  # an earlier record after a later one: never a step back
        assert coordinator.writes == [(SHARD, "00002/1")]
        assert batch.ends_shard is False and only(consumer).holdings.get(SHARD).state.acknowledged == 0
        await batch.checkpoint(batch.records[3])  # the batch's last record: the whole batch
        assert coordinator.writes == [(SHARD, "00002/1"), (SHARD, "00002/2")]
        assert only(consumer).holdings.get(SHARD).state.acknowledged == 1

    run(scenario)


def test_a_new_holder_resumes_after_the_user_record_acknowledged_inside_an_aggregate() -> None:
    async def scenario() -> None:
        # Reading AT sequence 2 serves the whole aggregate again; the user records 0 and 1 are dropped.
        kinesis = scripted({SHARD: [[(2, 3), 3]]})
        consumer, _ = make_consumer(kinesis)
        take(only(consumer), lease(checkpoint=Checkpoint.sequence("00002", 1)))
        batch = await consumer.__anext__()
        assert starts(kinesis) == [(SHARD, Position.after_sequence("00002", 1))]
        assert [(r.sequence_number, r.sub_sequence_number) for r in batch.records] == [("00002", 2), ("00003", 0)]

    run(scenario)


def test_checkpointing_a_record_of_another_batch_is_refused_and_writes_nothing() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1, 2], [3, 4]]})
        consumer, coordinator = make_consumer(kinesis, prefetch_batches=2)
        take(only(consumer), lease())
        first = await consumer.__anext__()
        second = await consumer.__anext__()
        with pytest.raises(ConfigurationError, match="not in this batch"):
            await second.checkpoint(first.records[0])
        assert coordinator.writes == []

    run(scenario)


# -- an expired checkpoint (issue #9 item 8, consumer side) -------------------------------


def test_a_holding_after_an_expired_checkpoint_is_counted_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    """An iterator AT the checkpointed record returns a later one: it expired, the gap may be lost."""

    async def scenario() -> None:
        kinesis = scripted({SHARD: [[12, 13]]})  # the read AT 7 starts at 12
        consumer, _ = make_consumer(kinesis, check_retention=True)
        take(only(consumer), lease(checkpoint=Checkpoint.sequence("00007")))
        batch = await consumer.__anext__()
        assert [r.sequence_number for r in batch.records] == ["00012", "00013"]
        assert starts(kinesis) == [(SHARD, Position.after_sequence("00007", 0))]  # no extra probe: the read tells
        assert consumer.metrics.checkpoints_expired == 1

    run(scenario)
    assert "checkpointed record 00007 is no longer in the stream" in caplog.text and "00012" in caplog.text


def test_a_checkpoint_still_in_the_stream_is_not_a_loss() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[7, 8]]})  # the read AT 7 finds 7 itself
        consumer, _ = make_consumer(kinesis, check_retention=True)
        take(only(consumer), lease(checkpoint=Checkpoint.sequence("00007")))
        batch = await consumer.__anext__()
        assert [r.sequence_number for r in batch.records] == ["00008"]
        assert consumer.metrics.checkpoints_expired == 0

    run(scenario)


def test_fail_on_data_loss_stops_the_consumer_naming_shard_and_positions() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[12]]})
        consumer, _ = make_consumer(kinesis, check_retention=True, fail_on_data_loss=True)
        take(only(consumer), lease(checkpoint=Checkpoint.sequence("00007")))
        with pytest.raises(DataLossError, match=r"shardId-000000000001.*00007.*00012"):
            await consumer.__anext__()

    run(scenario)


# -- a shard's end: which batch ends it (issue #9 item 6) ---------------------------------


def exhausted(what: str) -> RetriesExhaustedError:
    return RetriesExhaustedError(f"{what}: DynamoDB retries ran out", ThrottledError("throttled"))


def test_the_batch_from_a_final_page_with_records_says_it_ends_the_shard() -> None:
    """Checkpointing every Nth batch must still end the shard: the application can tell the last batch."""
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1], [2], [3]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        batches = []
        for _ in range(3):
            batch = await consumer.__anext__()
            batches.append(batch)
            if batch.ends_shard:  # the documented rule; no other checkpoint at all
                await batch.checkpoint()
        assert [b.ends_shard for b in batches] == [False, False, True]
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]
        assert consumer.held_shards() == [] and consumer.metrics.shards_ended == 1

    run(scenario)


def test_an_empty_final_page_marks_the_last_batch_still_waiting_for_the_application() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]]}, ends=True, end_apart=True))
        take(only(consumer), lease())
        await until(lambda: only(consumer).holdings.get(SHARD).state.phase is ShardPhase.END_SEEN, "the end to be seen")
        batch = await consumer.__anext__()
        assert batch.ends_shard and batch.last_sequence_number == "00001"
        await batch.checkpoint()
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


def test_an_end_seen_after_the_last_batch_was_passed_over_comes_as_an_empty_batch_that_ends_the_shard() -> None:
    """The common case on Kinesis: the last records come with an iterator, the next call returns the
    end. An application that skipped the last batch's checkpoint has moved on: it gets one more batch."""
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]]}, ends=True, end_apart=True)
        gate = kinesis.inject("get_records", Gate(), shard_id=SHARD, calls=(2,))
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        last = await consumer.__anext__()
        assert not last.ends_shard  # nothing says so yet; the application skips its checkpoint
        gate.open()
        end = await consumer.__anext__()
        assert end.shard_id == SHARD and len(end) == 0 and end.records == [] and end.ends_shard
        assert end.last_sequence_number is None and end.to_arrow().num_rows == 0
        assert end.index == last.index + 1 and coordinator.writes == []
        await end.checkpoint()
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]
        assert consumer.held_shards() == [] and consumer.metrics.shards_ended == 1

    run(scenario)


def test_checkpointing_the_last_records_after_the_end_was_seen_ends_the_shard_and_drops_the_empty_batch() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]], OTHER: [[7]]}, ends=True, end_apart=True)
        gate = kinesis.inject("get_records", Gate(), shard_id=SHARD, calls=(2,))
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        last = await consumer.__anext__()
        gate.open()
        await until(lambda: consumer.handout.queue.qsize() == 1, "the empty end batch to be queued")
        assert last.ends_shard  # every record of the shard is in this batch or before it
        await last.checkpoint()
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]
        take(only(consumer), lease(OTHER))
        after = await consumer.__anext__()
        assert after.shard_id == OTHER  # the empty end batch was not delivered: nothing left to end

    run(scenario)


def test_a_shard_whose_last_batch_stays_unacknowledged_is_counted_and_warned_about_once(caplog) -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]]}, ends=True, end_apart=True)
        gate = kinesis.inject("get_records", Gate(), shard_id=SHARD, calls=(2,))
        consumer, coordinator = make_consumer(kinesis, end_ack_warning_s=0.05)
        take(only(consumer), lease())
        await consumer.__anext__()
        gate.open()
        end = await consumer.__anext__()
        watch_ends(consumer)
        assert consumer.metrics.shards_held_past_end == 0  # not overdue yet
        with caplog.at_level(logging.WARNING, logger="kinesis_src.consumer"):
            await until(lambda: watch_ends(consumer) or consumer.metrics.shards_held_past_end == 1, "overdue")
            watch_ends(consumer)
        warnings = [r for r in caplog.records if "ends_shard" in r.getMessage()]
        assert len(warnings) == 1 and SHARD in warnings[0].getMessage()
        assert consumer.metrics.snapshot().shards[SHARD].held_past_end_s >= 0.05  # type: ignore[operator]
        assert "1 held past their end" in consumer.metrics.summary()
        await end.checkpoint()
        watch_ends(consumer)
        assert consumer.metrics.shards_held_past_end == 0 and coordinator.writes[-1][1].startswith("SHARD_END")

    run(scenario)


# -- a shard's end that cannot be written (issue #9 item 5) ---------------------------------


def test_a_lease_lost_while_the_fetcher_ends_a_shard_drops_that_shard_only() -> None:
    """SHARD_END written by the fetch task (everything was acknowledged before the end was seen) is
    rejected: the lease was stolen or expired meanwhile. The other shards carry on."""
    async def scenario() -> None:
        kinesis = scripted({OTHER: [[7], [8]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        coordinator.lost.add(SHARD)
        take(only(consumer), lease())
        take(only(consumer), lease(OTHER))
        await until(lambda: SHARD not in consumer.held_shards(), "the shard to be dropped")
        for expected in ("00007", "00008"):
            batch = await consumer.__anext__()
            assert batch.shard_id == OTHER and batch.last_sequence_number == expected
            await batch.checkpoint()
        assert consumer.held_shards() == [OTHER]
        assert consumer.metrics.leases_lost == 1 and consumer.metrics.shard_ends_failed == 1

    run(scenario)


def test_retries_running_out_while_the_fetcher_ends_a_shard_give_the_lease_back_and_the_rest_goes_on() -> None:
    async def scenario() -> None:
        kinesis = scripted({OTHER: [[7]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        coordinator.end_errors[SHARD] = exhausted("SHARD_END")
        take(only(consumer), lease())
        take(only(consumer), lease(OTHER))
        await until(lambda: coordinator.released == [SHARD], "the shard's lease to be given back")
        batch = await consumer.__anext__()
        assert batch.shard_id == OTHER and consumer.held_shards() == [OTHER]
        assert consumer.metrics.shard_ends_failed == 1

    run(scenario)


def test_a_shard_ending_checkpoint_whose_lease_is_lost_raises_lease_lost_and_the_rest_goes_on() -> None:
    """The documented rule: like any checkpoint after the lease was lost. The batch's records go to the
    next owner, which reads the tail again and ends the shard."""
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]], OTHER: [[7]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        last = await consumer.__anext__()
        assert last.ends_shard
        coordinator.lost.add(SHARD)
        with pytest.raises(LeaseLostError):
            await last.checkpoint()
        take(only(consumer), lease(OTHER))
        assert (await consumer.__anext__()).shard_id == OTHER
        assert consumer.held_shards() == [OTHER] and coordinator.writes == []

    run(scenario)


def test_retries_running_out_on_a_shard_ending_checkpoint_give_the_shard_up_with_lease_lost() -> None:
    """Retrying that checkpoint could not help: a first SHARD_END attempt that did land fences the retry.
    So the shard is given up at once, and the application hears what it hears for any lost lease."""
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1]], OTHER: [[7]]}, ends=True)
        consumer, coordinator = make_consumer(kinesis)
        take(only(consumer), lease())
        last = await consumer.__anext__()
        coordinator.end_errors[SHARD] = exhausted("SHARD_END")
        with pytest.raises(LeaseLostError) as raised:
            await last.checkpoint()
        assert isinstance(raised.value.__cause__, RetriesExhaustedError) and raised.value.shard_id == SHARD
        assert consumer.held_shards() == [] and coordinator.released == [SHARD]
        with pytest.raises(LeaseLostError):
            await last.checkpoint()  # the shard is no longer held: nothing is tried again
        take(only(consumer), lease(OTHER))
        assert (await consumer.__anext__()).shard_id == OTHER

    run(scenario)


# -- while SHARD_END is being written ---------------------------------------------------------


async def ending(consumer: Consumer, coordinator: RecordingCoordinator) -> tuple[asyncio.Task[None], threading.Event]:
    """The last batch of SHARD is being checkpointed; its SHARD_END write waits for the returned gate."""
    take(only(consumer), lease())
    last = await consumer.__anext__()
    gate = coordinator.end_gate = threading.Event()
    task = asyncio.create_task(last.checkpoint())
    await until(lambda: only(consumer).holdings.get(SHARD).state.phase is ShardPhase.ENDING, "the SHARD_END write")
    return task, gate


def test_the_coordinator_seeing_our_own_shard_end_land_is_not_a_lost_lease() -> None:
    """SHARD_END removes the lease's owner; a coordinator scan reading the table between the write and
    its response reports the lease lost. The write's outcome decides, not that report."""
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]]}, ends=True))
        task, gate = await ending(consumer, coordinator)
        only(consumer).on_lost(lease(), "taken by nobody")
        assert consumer.held_shards() == [SHARD]
        gate.set()
        await task
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")] and consumer.held_shards() == []
        assert (consumer.metrics.shards_ended, consumer.metrics.leases_lost) == (1, 0)

    run(scenario)


def test_a_shard_end_write_finishes_even_if_its_caller_is_cancelled_or_the_shard_released() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]]}, ends=True))
        task, gate = await ending(consumer, coordinator)
        release = asyncio.create_task(only(consumer).prepare_release(SHARD))
        task.cancel()  # e.g. the blocking wrapper's Ctrl-C
        gate.set()
        await asyncio.wait_for(release, 1)
        await until(lambda: consumer.metrics.shards_ended == 1, "the SHARD_END bookkeeping")
        assert consumer.held_shards() == [] and consumer.metrics.leases_released == 0
        assert coordinator.writes == [(SHARD, "SHARD_END shardId-000000000003")]

    run(scenario)


# -- back-pressure, release, failure, stop ----------------------------------------------


def test_prefetch_bounds_how_far_fetching_runs_ahead_of_the_application() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[i] for i in range(1, 20)]})
        consumer, _ = make_consumer(kinesis, prefetch_batches=2)
        take(only(consumer), lease())
        await until(lambda: kinesis.count("get_records", SHARD) >= 3, "the fetcher to fill its slots")
        for _ in range(20):  # scheduler turns: a fetcher not held back would fetch again in these
            await asyncio.sleep(0)
        assert only(consumer).holdings.get(SHARD).slots.locked()
        assert kinesis.count("get_records", SHARD) == 3  # two batches queued, the third page waits for a slot
        await consumer.__anext__()
        await until(lambda: kinesis.count("get_records", SHARD) == 4, "one more fetch after one delivery")

    run(scenario)


def test_release_waits_for_the_batch_in_hand_to_be_checkpointed_and_drops_the_rest() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1], [2]]})
        consumer, coordinator = make_consumer(kinesis, prefetch_batches=2)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        await until(lambda: consumer.handout.queue.qsize() == 1, "the second batch to be queued")
        release = asyncio.create_task(only(consumer).prepare_release(SHARD))
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


def test_release_lets_a_checkpoint_write_under_way_land_first() -> None:
    """The application checkpoints one batch in the background and takes the next (another shard's):
    the batch in hand is not the released shard's, yet its write is half-way; the release waits for it
    instead of ending the holding under it (which made the write's bookkeeping raise RuntimeError)."""

    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]], OTHER: [[10]]}))
        take(only(consumer), lease(SHARD))
        take(only(consumer), lease(OTHER))
        first = await consumer.__anext__()
        coordinator.checkpoint_gate = threading.Event()
        write = asyncio.create_task(first.checkpoint())
        await until(lambda: coordinator.at_gate == 1, "the write to be under way")
        await consumer.__anext__()  # the other shard's batch is now the one in hand
        release = asyncio.create_task(only(consumer).prepare_release(first.shard_id))
        for _ in range(20):
            await asyncio.sleep(0)
        coordinator.checkpoint_gate.set()
        await asyncio.wait_for(write, 5)  # lands: the lease was still ours
        await asyncio.wait_for(release, 5)
        assert coordinator.writes == [(first.shard_id, first.last_sequence_number)]
        assert consumer.metrics.leases_released == 1 and first.shard_id not in consumer.held_shards()

    run(scenario)


def test_a_checkpoint_write_that_outlasts_the_release_wait_still_returns() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]], OTHER: [[10]]}), release_timeout_s=0.01)
        take(only(consumer), lease(SHARD))
        take(only(consumer), lease(OTHER))
        first = await consumer.__anext__()
        coordinator.checkpoint_gate = threading.Event()
        write = asyncio.create_task(first.checkpoint())
        await until(lambda: coordinator.at_gate == 1, "the write to be under way")
        await consumer.__anext__()
        await asyncio.wait_for(only(consumer).prepare_release(first.shard_id), 5)  # gave up waiting: released
        coordinator.checkpoint_gate.set()
        await asyncio.wait_for(write, 5)  # the write landed while the lease was ours: no error
        assert coordinator.writes == [(first.shard_id, first.last_sequence_number)]

    run(scenario)


def test_release_gives_up_waiting_after_the_timeout() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1]]}), release_timeout_s=0.05)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        await asyncio.wait_for(only(consumer).prepare_release(SHARD), 1)
        with pytest.raises(LeaseLostError):
            await batch.checkpoint()
        assert coordinator.writes == []

    run(scenario)


def test_nothing_is_delivered_while_the_worker_cannot_trust_its_own_leases() -> None:
    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1], [2]]}), prefetch_batches=2)
        coordinator.live = False  # heartbeat overdue: others may have declared this worker dead
        take(only(consumer), lease())
        await until(lambda: consumer.handout.queue.qsize() == 2, "both batches to be queued")
        waiting = asyncio.create_task(consumer.__anext__())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        coordinator.live = True  # the heartbeat went through after all
        batch = await asyncio.wait_for(waiting, 1)
        assert batch.last_sequence_number == "00001"
        coordinator.live = False
        waiting = asyncio.create_task(consumer.__anext__())
        only(consumer).on_lost(lease(), "this worker was declared dead")  # ... or it was declared dead
        coordinator.live = True
        consumer.stop()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 1)  # batch 2 belonged to the lost lease: never delivered

    run(scenario)


def test_nothing_is_delivered_from_a_stale_view_of_the_table() -> None:
    """Scans stalled (DynamoDB throttled): a thief may have stolen the lease unseen; its prefetched
    batch must wait for a fresh scan, which drops the lease, instead of being handed out
    (the fault campaign's dynamodb-throttling scenario delivered such batches after the thief's ack)."""

    async def scenario() -> None:
        consumer, coordinator = make_consumer(scripted({SHARD: [[1], [2]]}), prefetch_batches=2)
        coordinator.fresh = False
        take(only(consumer), lease())
        await until(lambda: consumer.handout.queue.qsize() == 2, "both batches to be queued")
        waiting = asyncio.create_task(consumer.__anext__())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        only(consumer).on_lost(lease(), "taken by thief")  # the next scan that answers shows the steal
        coordinator.fresh = True
        consumer.stop()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 1)

    run(scenario)


def test_a_fetch_error_no_retry_can_fix_reaches_the_application() -> None:
    async def scenario() -> None:
        bad = MalformedResponseError("GetRecords response body is not the documented shape")
        kinesis = scripted({})
        kinesis.inject("get_records", bad, shard_id=SHARD)
        consumer, _ = make_consumer(kinesis)
        take(only(consumer), lease())
        with pytest.raises(MalformedResponseError):
            await consumer.__anext__()

    run(scenario)


def test_stop_ends_the_iteration_and_metrics_count_what_was_delivered() -> None:
    async def scenario() -> None:
        kinesis = scripted({SHARD: [[1, 2, 3]]})
        kinesis.shard("orders", SHARD).lag_ms = 250
        consumer, _ = make_consumer(kinesis)
        take(only(consumer), lease())
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
        (datetime(2026, 1, 2, tzinfo=UTC), PositionKind.AT_TIMESTAMP),
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
