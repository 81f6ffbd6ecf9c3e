"""The application's next batch after a unit hand-over: it never waits on a reader that is gone (#23).

A batch waits in ``Consumer.__anext__`` while its reader is not trusted
(:meth:`~kinesis_src.consumer.stream_reader.StreamReader.trusted`). A reader
handed over at runtime (``UnitReaders._stop``) has a stopped coordinator that
never reads the table again, so it is never trusted again: the wait must end
when the batch's holding is gone, and on the consumer's failure, or no other
unit's batch ever comes out. Here two units of one stream, on the fake
Kinesis with recording coordinators (no servers).
"""

from __future__ import annotations

import asyncio

from consumer_harness import (
    RecordingCoordinator,
    make_consumer,
    make_lease,
    run,
    take,
    until,
)
from fake_kinesis import FakeKinesis

from kinesis_src.consumer import Consumer
from kinesis_src.consumer.stream_reader import StreamReader
from kinesis_src.errors import KinesisSourceError
from lineage import KeyRange, hash_key_of

SHARD = "shardId-000000000000"
LOWER, UPPER = KeyRange.slice(0, 2), KeyRange.slice(1, 2)
KEYS = [f"k{i}" for i in range(12)]
WAIT_S = 3.0  # the deadline a hanging __anext__ fails by


def stream_of_both_halves() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("orders")
    for key in KEYS:
        fake.put_record("orders", key, key.encode())
    assert {hash_key_of(k) in LOWER for k in KEYS} == {True, False}, "records in both units"
    return fake


def two_units(consumer: Consumer, lower_trusted: bool) -> tuple[StreamReader, StreamReader]:
    """Readers of LOWER and UPPER replace the consumer's one; LOWER's view is stale unless ``lower_trusted``."""
    metrics = consumer.stream_metrics["orders"]
    lower, upper = (StreamReader(consumer.config, consumer.handout, "orders", metrics, unit) for unit in (LOWER, UPPER))
    lower.coordinator = RecordingCoordinator(fresh=lower_trusted)  # type: ignore[assignment]
    upper.coordinator = RecordingCoordinator()  # type: ignore[assignment]
    consumer.units.readers = {f"orders@{LOWER}": lower, f"orders@{UPPER}": upper}
    return lower, upper


async def waiting_on_lower(consumer: Consumer, lower: StreamReader) -> asyncio.Task:
    """__anext__ took LOWER's batch off the queue and waits for LOWER to be trusted."""
    take(lower, make_lease(SHARD))
    await until(lambda: not consumer.handout.queue.empty(), "LOWER's batch")
    task = asyncio.create_task(consumer.__anext__())
    await until(lambda: consumer.handout.queue.empty(), "__anext__ to take LOWER's batch")
    assert not task.done()
    return task


def test_a_batch_of_a_unit_handed_over_while_it_waited_is_dropped_and_other_units_flow() -> None:
    async def scenario() -> list[str]:
        consumer, _ = make_consumer(stream_of_both_halves())
        lower, upper = two_units(consumer, lower_trusted=False)
        task = await waiting_on_lower(consumer, lower)
        await consumer.units._stop(f"orders@{LOWER}", lower)  # claimed by a sticky worker: handed over
        take(upper, make_lease(SHARD))
        try:
            batch = await asyncio.wait_for(task, WAIT_S)
        except TimeoutError:
            raise AssertionError(f"__anext__ still waits on the handed-over unit after {WAIT_S}s") from None
        assert consumer.handout.in_flight is batch
        return [r.partition_key for r in batch.records]

    keys = run(scenario)
    assert keys == [k for k in KEYS if hash_key_of(k) in UPPER]


def test_a_failure_ends_the_wait_for_an_untrusted_reader() -> None:
    async def scenario() -> None:
        consumer, _ = make_consumer(stream_of_both_halves())
        lower, _ = two_units(consumer, lower_trusted=False)
        task = await waiting_on_lower(consumer, lower)
        consumer.handout.fail(KinesisSourceError("the lease coordinator of orders failed"))
        try:
            await asyncio.wait_for(task, WAIT_S)
        except TimeoutError:
            raise AssertionError(f"__anext__ ignored the consumer's failure for {WAIT_S}s") from None

    try:
        run(scenario)
    except KinesisSourceError as exc:
        assert "coordinator of orders failed" in str(exc)
    else:
        raise AssertionError("__anext__ returned instead of raising the failure")


def test_a_batch_of_a_trusted_reader_still_waits_for_nothing() -> None:
    """The control: the same batch of a trusted, current reader is handed out at once."""

    async def scenario() -> list[str]:
        consumer, _ = make_consumer(stream_of_both_halves())
        lower, _ = two_units(consumer, lower_trusted=True)
        take(lower, make_lease(SHARD))
        batch = await asyncio.wait_for(consumer.__anext__(), WAIT_S)
        return [r.partition_key for r in batch.records]

    assert run(scenario) == [k for k in KEYS if hash_key_of(k) in LOWER]
