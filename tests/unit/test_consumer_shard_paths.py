"""The consumer's less travelled paths at a shard's end (issue #23), on the fake Kinesis and a recording coordinator.

* the empty end batch that follows a last batch the application took while
  a checkpoint write held the shard's lock carries no records;
* a SHARD_END write under way when the coordinator re-takes the lease:
  the old holding is lost twice (once for the re-take, once by the write's
  own failure) without a RuntimeError reaching the checkpoint's caller;
* a shard outside a worker's key range whose SHARD_END write fails is
  handed back, so a later cycle ends it (tests/unit/test_consumer_end_out_of_range.py
  runs that one end to end, with the merge child read).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from consumer_harness import RecordingCoordinator, make_consumer, make_lease, only, run, take, until
from fake_kinesis import FakeKinesis, Gate

from kinesis_src import KeyRange
from kinesis_src.consumer.shard_state import ShardPhase
from kinesis_src.errors import LeaseLostError, RetriesExhaustedError, ThrottledError
from kinesis_src.leases.model import Checkpoint, Lease
from lineage import HashRange

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

SHARD = "shardId-000000000001"
END = "SHARD_END shardId-000000000003"


def closed_shard(*pages: list[int]) -> FakeKinesis:
    """Stream "orders": SHARD (closed, child shard 3) holds ``pages``, one per GetRecords; the last
    page carries the end."""
    fake = FakeKinesis()
    fake.create_stream("orders", listing=[listing(1, 0, 100, ending="99999"), listing(3, 0, 100, (1,))])
    for seq in (s for page in pages for s in page):
        fake.put_record("orders", f"k{seq}", b"%d" % seq, shard_id=SHARD, sequence_number=f"{seq:05d}")
    fake.shard("orders", SHARD).page_sizes = [len(p) for p in pages]
    return fake


def lease(counter: int = 1, checkpoint: Checkpoint | None = None) -> Lease:
    return make_lease(SHARD, checkpoint, counter, HashRange(0, 100))


# -- item 6: the empty end batch is empty ---------------------------------------------------------


def test_the_end_batch_after_a_last_batch_taken_during_a_checkpoint_write_carries_no_records() -> None:
    """Batch 2 (the final page) is queued while batch 1's checkpoint holds the shard's lock; the
    application takes batch 2 before the fetcher judges the end. The end batch that follows must be
    empty: batch 2's records were delivered once already."""

    async def scenario() -> None:
        kinesis = closed_shard([1], [2])
        final_page = kinesis.inject("get_records", Gate(), shard_id=SHARD, calls=(2,))
        consumer, coordinator = make_consumer(kinesis)
        reader = only(consumer)
        take(reader, lease())
        first = await consumer.__anext__()
        coordinator.checkpoint_gate = threading.Event()
        write = asyncio.create_task(first.checkpoint())
        await until(lambda: reader.holdings.get(SHARD).lock.locked() and coordinator.at_gate == 1,
                    "batch 1's checkpoint write to hold the lock")
        final_page.open()
        last = await consumer.__anext__()  # queued, then the fetcher waits for the lock to judge the end
        assert [r.sequence_number for r in last.records] == ["00002"]
        assert reader.holdings.get(SHARD).state.phase is ShardPhase.FETCHING  # the end is not judged yet
        coordinator.checkpoint_gate.set()
        await asyncio.wait_for(write, 5)
        end = await asyncio.wait_for(consumer.__anext__(), 5)
        assert end.index == last.index + 1 and end.ends_shard
        assert [r.sequence_number for r in end.records] == [] and len(end) == 0 and end.last_sequence_number is None
        await end.checkpoint()
        assert coordinator.writes == [(SHARD, "00001"), (SHARD, END)]
        assert consumer.held_shards() == [] and consumer.metrics.records == 2

    run(scenario)


# -- suspected: a holding lost twice while its SHARD_END is written ------------------------------


@pytest.mark.parametrize("write_lands", [False, True], ids=["write-fenced", "write-lands"])
def test_a_lease_re_taken_while_its_shard_end_is_written_leaves_no_runtime_error(write_lands: bool) -> None:
    """The SHARD_END write of holding 1 is slow (DynamoDB retries); meanwhile the coordinator lost the
    lease and took it again (holding 2 replaces holding 1, which goes LOST). The write then fails,
    fenced by the new counter (LOST again: before, RuntimeError "cannot go to lost in state lost"
    reached the checkpoint's caller instead of LeaseLostError), or lands (acknowledging the LOST holding
    raised the same RuntimeError): the checkpoint returns. The write names holding 1's counter; the real
    coordinator refuses it (tests/unit/test_consumer_replaced_end.py), this recording one lets it land."""

    async def scenario() -> None:
        consumer, coordinator = make_consumer(closed_shard([1]))
        reader = only(consumer)
        take(reader, lease(counter=1))
        last = await consumer.__anext__()
        assert last.ends_shard
        coordinator.end_gate = threading.Event()
        checkpoint = asyncio.create_task(last.checkpoint())
        await until(lambda: reader.holdings.get(SHARD).state.phase is ShardPhase.ENDING, "the SHARD_END write")
        old = reader.holdings.get(SHARD)
        take(reader, lease(counter=3))  # lost and re-taken while the write waits
        assert old.state.phase is ShardPhase.LOST and reader.holdings.get(SHARD) is not old
        if not write_lands:
            coordinator.lost.add(SHARD)  # the condition on the old counter fails
        coordinator.end_gate.set()
        if write_lands:
            await asyncio.wait_for(checkpoint, 5)
            assert coordinator.writes == [(SHARD, END)] and consumer.metrics.shards_ended == 1
        else:
            with pytest.raises(LeaseLostError):
                await asyncio.wait_for(checkpoint, 5)
            assert coordinator.writes == [] and consumer.metrics.shard_ends_failed == 1
        assert old.state.phase is ShardPhase.LOST and coordinator.end_counters == [1]
        assert reader.holdings.get(SHARD) is not None and reader.holdings.get(SHARD) is not old

    run(scenario)


# -- item 1: a shard outside the key range whose SHARD_END write fails ------------------------------


class FailsOnce(RecordingCoordinator):
    """Its first SHARD_END write of each shard fails after DynamoDB's retries ran out."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()

    def shard_ended(self, shard_id: str, children: object, counter: int | None = None) -> None:
        if shard_id not in self.failed:
            self.failed.add(shard_id)
            raise RetriesExhaustedError("SHARD_END: DynamoDB retries ran out", ThrottledError("throttled"))
        super().shard_ended(shard_id, children, counter)  # type: ignore[arg-type]


def test_an_out_of_range_shard_whose_shard_end_write_fails_is_handed_back_and_ended_at_the_next_take() -> None:
    async def scenario() -> None:
        fake = closed_shard([1])
        consumer, _ = make_consumer(fake, key_range=KeyRange(101, 200))  # SHARD is 0..100: outside
        coordinator = FailsOnce()
        reader = only(consumer)
        reader.coordinator = coordinator  # type: ignore[assignment]
        take(reader, lease())
        await until(lambda: coordinator.released == [SHARD], "the lease to be handed back")
        assert coordinator.writes == [] and consumer.held_shards() == []
        take(reader, lease(counter=2))  # a later cycle takes it again
        await until(lambda: coordinator.writes == [(SHARD, "SHARD_END ")], "SHARD_END at the second take")
        assert coordinator.released == [SHARD] and fake.count("get_shard_iterator", SHARD) == 0  # never read

    run(scenario)
