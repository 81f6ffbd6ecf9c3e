"""The Consumer with ``consumer_mode="efo"`` on the shared fake Kinesis: batches from subscriptions.

Built as ``test_consumer_acks`` builds its consumers (the fake's async twin as the Kinesis client,
a recording coordinator, leases handed in directly), with ``consumer.fan_out`` naming a consumer
registered in the fake, as ``start()`` would after registering it.
"""

from __future__ import annotations

import pytest
from consumer_harness import (
    RecordingCoordinator,
    make_consumer,
    make_lease,
    only,
    run,
    take,
    until,
)
from fake_kinesis import START, FakeKinesis, event_stream_error, shard_id
from kpl import aggregate

from kinesis_src.consumer import Consumer
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.positions import Position
from kinesis_src.retrieval import async_fanout
from kinesis_src.retrieval.registration import FanOutTarget

STREAM = "orders"
SHARD, LEFT, RIGHT = (shard_id(i) for i in range(3))


def stream_of(*records: bytes, per_event: int = 2, closed: bool = False) -> tuple[FakeKinesis, list[str]]:
    """Stream "orders", one shard holding ``records`` (one a second), ``per_event`` to an event; with
    ``closed`` the shard is split after them. Returns the fake and the sequence numbers."""
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    seqs = [fake.put_record(STREAM, f"k{i}", data, shard_id=SHARD, arrival=START + i)["SequenceNumber"]
            for i, data in enumerate(records)]
    if closed:
        fake.split_shard(STREAM, SHARD, 2**127)
    fake.records_per_event = per_event
    return fake, seqs


def plain(n: int) -> list[bytes]:
    return [b"r%d" % i for i in range(n)]


def lease(checkpoint: Checkpoint | None = None, counter: int = 1) -> Lease:
    return make_lease(SHARD, checkpoint, counter)


def efo_consumer(fake: FakeKinesis) -> tuple[Consumer, RecordingCoordinator]:
    """test_consumer_acks' consumer, in EFO mode, with the consumer ``start()`` would have registered."""
    consumer, coordinator = make_consumer(fake, check_retention=True, consumer_mode="efo")
    stream_arn = fake.stream(STREAM).arn
    only(consumer).fan_out = FanOutTarget(fake.register_consumer(stream_arn, "app").arn, stream_arn, "app")
    return consumer, coordinator


def subscribed_at(fake: FakeKinesis) -> list[Position | None]:
    return [c.position for c in fake.calls_to("subscribe", SHARD)]


def test_batches_come_from_subscriptions_and_a_new_holding_resumes_right_after_the_checkpoint() -> None:
    async def scenario() -> None:
        fake, seqs = stream_of(*plain(6))
        consumer, coordinator = efo_consumer(fake)
        take(only(consumer), lease())
        first = await consumer.__anext__()
        assert [r.sequence_number for r in first.records] == seqs[:2] and first.shard_id == SHARD
        await first.checkpoint()
        second = await consumer.__anext__()
        assert [r.sequence_number for r in second.records] == seqs[2:4]  # delivered, never acknowledged
        assert coordinator.writes == [(SHARD, seqs[1])]

        only(consumer).on_lost(lease(), "taken")  # the checkpoint is all the next holding knows
        take(only(consumer), lease(Checkpoint.sequence(seqs[1]), counter=2))
        again = await consumer.__anext__()
        assert [r.sequence_number for r in again.records] == [seqs[2]]  # the event AT seqs[1], which is dropped
        await again.checkpoint()
        assert coordinator.writes == [(SHARD, seqs[1]), (SHARD, seqs[2])]
        assert subscribed_at(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[1], 0)]
        assert fake.count("get_records") == 0 and fake.count("get_shard_iterator") == 0
        await until(lambda: fake.subscriptions_open == 1, "the lost holding's subscription to close")
        consumer.stop()

    run(scenario)


def test_the_shards_end_reaches_the_coordinator_with_its_children() -> None:
    async def scenario() -> None:
        fake, seqs = stream_of(*plain(3), closed=True)
        consumer, coordinator = efo_consumer(fake)
        take(only(consumer), lease())
        seen: list[str] = []
        while consumer.held_shards():
            batch = await consumer.__anext__()
            seen.extend(r.sequence_number for r in batch.records)
            await batch.checkpoint()
        assert seen == seqs and batch.ends_shard
        assert coordinator.writes == [(SHARD, seqs[1]), (SHARD, f"SHARD_END {LEFT},{RIGHT}")]
        assert consumer.metrics.shards_ended == 1 and fake.count("get_records") == 0
        await until(lambda: fake.subscriptions_open == 0, "the ended shard's subscription to close")

    run(scenario)


def test_a_kpl_aggregate_arrives_de_aggregated_and_a_checkpoint_inside_it_resumes_at_the_next_user_record() -> None:
    async def scenario() -> None:
        users = [(f"user{i}", None, b"u%d" % i) for i in range(3)]
        fake, seqs = stream_of(b"plain", aggregate(users), b"after", per_event=10)
        consumer, coordinator = efo_consumer(fake)
        take(only(consumer), lease())
        batch = await consumer.__anext__()
        got = [(r.sequence_number, r.sub_sequence_number, r.partition_key, r.data) for r in batch.records]
        assert got == [(seqs[0], 0, "k0", b"plain"), *[(seqs[1], i, f"user{i}", b"u%d" % i) for i in range(3)],
                       (seqs[2], 0, "k2", b"after")]
        assert consumer.metrics.aggregates == 1
        await batch.checkpoint(batch.records[2])  # user record 1 of the aggregate
        assert coordinator.writes == [(SHARD, f"{seqs[1]}/1")]

        only(consumer).on_lost(lease(), "taken")
        take(only(consumer), lease(Checkpoint.sequence(seqs[1], 1), counter=2))
        resumed = await consumer.__anext__()
        assert [(r.sequence_number, r.sub_sequence_number) for r in resumed.records] == [(seqs[1], 2), (seqs[2], 0)]
        assert subscribed_at(fake)[-1] == Position.after_sequence(seqs[1], 1)
        consumer.stop()

    run(scenario)


def test_an_internal_failure_on_one_shards_event_stream_costs_that_shard_a_resubscribe_not_the_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS documents InternalFailureException on the event stream as transient: resubscribe. Three
    shards, the middle one's stream fails after its first event: every record of every shard arrives
    once and in order, and only that shard subscribed again."""
    monkeypatch.setattr(async_fanout, "BROKEN_PAUSE_S", 0.0)

    async def scenario() -> None:
        fake = FakeKinesis()
        fake.create_stream(STREAM, shard_count=3)
        shards = [shard_id(i) for i in range(3)]
        put = {sid: [fake.put_record(STREAM, f"k{i}", b"%s-%d" % (sid.encode(), i), shard_id=sid)["SequenceNumber"]
                     for i in range(5)] for sid in shards}
        fake.records_per_event = 2
        fake.inject("subscribe_event", event_stream_error("InternalFailureException"), shard_id=shards[1], calls=(2,))
        consumer, _ = efo_consumer(fake)
        for sid in shards:
            take(only(consumer), make_lease(sid))
        seen: dict[str, list[str]] = {sid: [] for sid in shards}
        while sum(map(len, seen.values())) < 15:
            batch = await consumer.__anext__()
            seen[batch.shard_id].extend(r.sequence_number for r in batch.records)
            await batch.checkpoint()
        assert seen == put
        assert [fake.count("subscribe", sid) for sid in shards] == [1, 2, 1]
        assert fake.calls_to("subscribe", shards[1])[1].position == Position.after_sequence(put[shards[1]][1])
        consumer.stop()

    run(scenario)
