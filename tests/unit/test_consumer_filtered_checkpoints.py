"""Checkpoints past records a key range filters out (issue #23 item 5), on the fake Kinesis and a
recording coordinator.

A shard the range only partly covers is read whole and filtered. Its
checkpoint must follow what was read, not only what was delivered: else the
checkpointed record expires while every later record was read and left out,
and the next holder reports it trimmed (a false data loss, fatal with
``fail_on_data_loss``). The position of filtered records is written at most
once per ``filtered_checkpoint_interval_s``, and never past a delivered batch
that is not acknowledged.
"""

from __future__ import annotations

import asyncio

import pytest
from consumer_harness import make_consumer, make_lease, only, run, take, until
from fake_kinesis import FakeKinesis

from kinesis_src import KeyRange
from kinesis_src.consumer import Consumer
from kinesis_src.consumer.shard_state import FilteredTail, HeldShard, ShardState
from kinesis_src.consumer.stream_reader import filtered_tail
from kinesis_src.errors import DataLossError
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.records import RecordPage
from lineage import hash_key_of

SHARD = "shardId-000000000000"
LOWER = KeyRange.slice(0, 2)  # the shard holds the whole hash space: straddled
IN = [k for k in (f"in-{i}" for i in range(200)) if hash_key_of(k) in LOWER]
OUT = [k for k in (f"out-{i}" for i in range(200)) if hash_key_of(k) not in LOWER]
T0 = 1_700_000_000.0


def straddled(first: list[str], then: list[str], page_size: int = 3) -> FakeKinesis:
    """One open shard over the whole space: the records of keys ``first`` at T0, then ``then`` an hour
    later, ``page_size`` records per GetRecords. Sequence numbers 1, 2, ... in that order."""
    fake = FakeKinesis(clock=T0)
    fake.create_stream("orders")
    for n, key in enumerate([*first, *then], start=1):
        arrival = T0 + n if n <= len(first) else T0 + 3600 + n
        fake.put_record("orders", key, key.encode(), sequence_number=f"{n:05d}", arrival=arrival)
    fake.shard("orders", SHARD).page_sizes = [page_size] * ((len(first) + len(then)) // page_size + 1)
    return fake


def lease(checkpoint: Checkpoint | None = None, counter: int = 1) -> Lease:
    return make_lease(SHARD, checkpoint, counter)


def reading(fake: FakeKinesis, interval_s: float = 0.0, **options: object) -> tuple[Consumer, object]:
    consumer, coordinator = make_consumer(fake, key_range=LOWER, **options)
    only(consumer).filtered_checkpoint_interval_s = interval_s
    return consumer, coordinator


def test_a_checkpoint_follows_the_filtered_records_so_a_new_holder_finds_it_after_retention() -> None:
    """One in-range record, then an hour of other ranges' records. Without the fix the checkpoint stayed
    at the in-range record; trimmed past retention, the next holder failed with DataLossError."""
    later = OUT[:7]
    last = f"{1 + len(later):05d}"

    async def scenario() -> None:
        fake = straddled(IN[:1], later)
        first, coordinator = reading(fake)
        take(only(first), lease())
        batch = await first.__anext__()
        assert [r.partition_key for r in batch.records] == IN[:1]
        await batch.checkpoint()
        await until(lambda: coordinator.writes[-1:] == [(SHARD, last)], "the checkpoint to pass the filtered records")
        assert first.metrics.records_filtered == len(later)
        first.stop()
        fake.trim("orders", before=T0 + 1800)  # the in-range record expired; the others are still there
        fake.put_record("orders", IN[1], b"new", sequence_number="00100", arrival=T0 + 7200)
        second, _ = reading(fake, check_retention=True, fail_on_data_loss=True)
        take(only(second), lease(Checkpoint.sequence(coordinator.writes[-1][1]), counter=2))
        resumed = await asyncio.wait_for(second.__anext__(), 5)
        assert [r.partition_key for r in resumed.records] == [IN[1]]
        assert second.metrics.checkpoints_expired == 0

    run(scenario)


def test_without_a_filtered_checkpoint_the_next_holder_reports_the_loss() -> None:
    """What the test above guards against, shown on purpose: resuming at the expired in-range record."""

    async def scenario() -> None:
        fake = straddled(IN[:1], OUT[:4])
        fake.trim("orders", before=T0 + 1800)
        consumer, _ = reading(fake, check_retention=True, fail_on_data_loss=True)
        take(only(consumer), lease(Checkpoint.sequence("00001")))
        fake.put_record("orders", IN[1], b"new", sequence_number="00100", arrival=T0 + 7200)
        with pytest.raises(DataLossError, match="00001"):
            await consumer.__anext__()

    run(scenario)


def test_a_filtered_position_is_never_checkpointed_past_a_batch_not_acknowledged() -> None:
    """Batch 1 (the in-range record, with filtered records after it on its page and on later pages)
    stays in the application's hands: nothing is written. Once it is acknowledged, the next page
    (caught up: empty) writes the position of the last filtered record."""
    later = OUT[:8]
    last = f"{1 + len(later):05d}"

    async def scenario() -> None:
        fake = straddled(IN[:1], later)
        consumer, coordinator = reading(fake)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        await until(lambda: consumer.metrics.records_filtered == len(later), "every filtered record to be read")
        pages = fake.count("get_records", SHARD)
        await until(lambda: fake.count("get_records", SHARD) >= pages + 3, "three more (empty) pages")
        assert coordinator.writes == []
        await batch.checkpoint()
        assert coordinator.writes == [(SHARD, "00001")]
        await until(lambda: coordinator.writes[-1:] == [(SHARD, last)], "the filtered position after the ack")
        assert coordinator.writes == [(SHARD, "00001"), (SHARD, last)]  # once: no write per empty page

    run(scenario)


def test_a_queued_in_range_batch_holds_back_the_filtered_position_after_it() -> None:
    """Filtered pages, then an in-range record (batch 1, queued), then more filtered pages: the position
    before batch 1 may be written, the one after it only when batch 1 is acknowledged."""

    async def scenario() -> None:
        fake = FakeKinesis(clock=T0)
        fake.create_stream("orders")
        keys = [*OUT[:3], IN[0], *OUT[3:6]]
        for n, key in enumerate(keys, start=1):
            fake.put_record("orders", key, key.encode(), sequence_number=f"{n:05d}")
        fake.shard("orders", SHARD).page_sizes = [3, 1, 3]
        consumer, coordinator = reading(fake)
        take(only(consumer), lease())
        await until(lambda: consumer.metrics.records_filtered == 6, "every filtered record to be read")
        pages = fake.count("get_records", SHARD)
        await until(lambda: fake.count("get_records", SHARD) >= pages + 3, "three more (empty) pages")
        assert coordinator.writes == [(SHARD, "00003")]  # before the queued batch: safe
        batch = await consumer.__anext__()
        await batch.checkpoint()
        await until(lambda: coordinator.writes[-1:] == [(SHARD, "00007")], "the filtered position after batch 1")
        assert coordinator.writes == [(SHARD, "00003"), (SHARD, "00004"), (SHARD, "00007")]

    run(scenario)


def test_filtered_positions_are_written_at_most_once_per_interval() -> None:
    async def scenario() -> None:
        fake = straddled([], OUT[:30], page_size=2)
        consumer, coordinator = reading(fake, interval_s=3600.0)
        take(only(consumer), lease())
        await until(lambda: consumer.metrics.records_filtered == 30, "every filtered record to be read")
        assert fake.count("get_records", SHARD) >= 15 and coordinator.writes == []
        only(consumer).filtered_checkpoint_interval_s = 0.0  # the interval has passed
        await until(lambda: coordinator.writes == [(SHARD, "00030")], "the filtered position")
        pages = fake.count("get_records", SHARD)
        await until(lambda: fake.count("get_records", SHARD) >= pages + 3, "three more (empty) pages")
        assert coordinator.writes == [(SHARD, "00030")]  # nothing new was filtered: nothing new to write

    run(scenario)


# -- the rule, without a loop -------------------------------------------------------------------------


def held(acknowledged: int, produced: int, tail_after: int, partly: tuple[int, int] | None = None) -> HeldShard:
    state = ShardState(SHARD, produced=produced, handed_out=produced, acknowledged=acknowledged)
    shard = HeldShard(lease(), 1, asyncio.Semaphore(1), state, partly_acknowledged=partly)
    shard.filtered = FilteredTail(Checkpoint.sequence("00009"), tail_after)
    return shard


@pytest.mark.parametrize(
    "acknowledged, produced, after, partly, due",
    [
        (0, 0, 0, None, True),  # nothing delivered before the filtered records
        (2, 3, 2, None, True),  # batch 3 (after them) unacknowledged: they still come first
        (1, 2, 2, None, False),  # batch 2, before them, not acknowledged
        (3, 3, 2, None, False),  # batch 3, after them, acknowledged: writing them would step back
        (2, 3, 2, (3, 0), False),  # a record of batch 3 was checkpointed: the same
        (1, 2, 2, (2, 0), False),  # only part of batch 2 is acknowledged
    ],
)
def test_a_filtered_position_is_due_only_in_acknowledgement_order(
    acknowledged: int, produced: int, after: int, partly: tuple[int, int] | None, due: bool
) -> None:
    shard = held(acknowledged, produced, after, partly)
    assert (shard.filtered_due(now=100.0, interval_s=60.0) is not None) == due
    assert shard.filtered_due(now=59.0, interval_s=60.0) is None  # the interval since the take (or last write)
    shard.state.see_end((), now=100.0)
    assert shard.filtered_due(now=100.0, interval_s=60.0) is None  # SHARD_END covers it


def test_the_tail_of_a_page_is_its_last_user_record_and_only_when_the_filter_left_it_out() -> None:
    page = RecordPage(["in", "out", "out"], [b"", b"", b""], ["00005", "00006", "00006"], [None] * 3, [None] * 3,
                      "it", 0, sub_sequence_numbers=[0, 0, 1])
    assert filtered_tail(page, page.slice(1), produced=4) == FilteredTail(Checkpoint.sequence("00006", 1), 5)
    assert filtered_tail(page, page.slice(0), produced=4) == FilteredTail(Checkpoint.sequence("00006", 1), 4)
    assert filtered_tail(page, page.slice(3, 2), produced=4) is None  # its last record is delivered
