"""The shared fake Kinesis (tests/fake_kinesis) behaves as the tests assume Kinesis does."""

from __future__ import annotations

import asyncio

import pytest
from fake_kinesis import MAX_HASH_KEY, FakeKinesis, Gate, shard_id, utc

from kinesis_src.errors import (
    ConsumerStreamMismatchError,
    InvalidRequestError,
    IteratorExpiredError,
    ShardNotFoundError,
    StreamNotFoundError,
    ThrottledError,
)
from kinesis_src.positions import Position
from lineage import ShardGraph

HALF = 2**127
S0, S1, S2, S3 = (shard_id(i) for i in range(4))


def stream_of(*arrivals: float) -> tuple[FakeKinesis, list[str]]:
    """One shard holding a record per arrival time; returns the fake and the sequence numbers."""
    fake = FakeKinesis(clock=0.0)
    fake.create_stream("s")
    seqs = [fake.put_record("s", f"k{i}", b"%d" % i, shard_id=S0, arrival=t)["SequenceNumber"] for i, t in enumerate(arrivals)]
    return fake, seqs


def read_all(fake: FakeKinesis, position: Position, sid: str = S0, limit: int = 100) -> list[str]:
    page = fake.get_records(fake.get_shard_iterator("s", sid, position), limit, sid, "s")
    return page.sequence_numbers


# -- lineage ----------------------------------------------------------------------------------------


def test_split_and_merge_close_parents_and_list_children_with_their_lineage() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    assert fake.split_shard("s", S0, HALF // 2) == (shard_id(2), shard_id(3))
    merged = fake.merge_shards("s", shard_id(3), S1)
    listing = fake.list_shards("s")
    assert [s["ShardId"] for s in listing] == [shard_id(i) for i in range(5)]
    graph = ShardGraph()
    graph.update(listing)
    graph.validate()  # the open shards tile the hash space
    assert graph.parents(merged) == (shard_id(3), S1) and graph.children(S0) == (shard_id(2), shard_id(3))
    assert [s["ShardId"] for s in listing if "EndingSequenceNumber" not in s["SequenceNumberRange"]] == [shard_id(2), merged]
    assert listing[4]["HashKeyRange"] == {"StartingHashKey": str(HALF // 2), "EndingHashKey": str(MAX_HASH_KEY)}
    assert fake.describe_stream("s").open_shard_count == 2
    assert [s["ShardId"] for s in fake.list_shards("s", shard_filter={"Type": "AT_LATEST"})] == [shard_id(2), merged]
    assert [s["ShardId"] for s in fake.list_shards("s", exclusive_start_shard_id=shard_id(2))] == [shard_id(3), merged]


def test_a_closed_shard_read_to_its_end_names_its_children_once_every_record_was_returned() -> None:
    fake, seqs = stream_of(1.0, 2.0, 3.0)
    fake.split_shard("s", S0, HALF)
    first = fake.get_records(fake.get_shard_iterator("s", S0, Position.trim_horizon()), 2, S0, "s")
    assert first.sequence_numbers == seqs[:2] and not first.shard_ended and first.millis_behind_latest > 0
    last = fake.get_records(first.next_iterator, 2, S0, "s")
    assert last.sequence_numbers == seqs[2:] and last.shard_ended and last.millis_behind_latest == 0
    assert [(c.shard_id, c.parent_shards) for c in last.child_shards] == [(S1, (S0,)), (S2, (S0,))]
    fake.shard("s", S0).end_page_apart = True
    apart = fake.get_records(fake.get_shard_iterator("s", S0, Position.at_sequence(seqs[2])), 5, S0, "s")
    assert apart.sequence_numbers == seqs[2:] and not apart.shard_ended
    assert fake.get_records(apart.next_iterator, 5, S0, "s").shard_ended


def test_records_are_routed_by_the_hash_of_their_key_to_the_open_shard() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    assert fake.put_record("s", "any", b"x", explicit_hash_key=str(HALF))["ShardId"] == S1
    fake.split_shard("s", S1, HALF + 10)
    assert fake.put_record("s", "any", b"x", explicit_hash_key=str(HALF + 10))["ShardId"] == S3


# -- iterators ----------------------------------------------------------------------------------------


def test_iterator_positions_select_the_records_kinesis_would() -> None:
    fake, seqs = stream_of(10.0, 20.0, 30.0, 40.0)
    assert read_all(fake, Position.trim_horizon()) == seqs
    assert read_all(fake, Position.at_sequence(seqs[1])) == seqs[1:]
    assert read_all(fake, Position.after_sequence(seqs[1])) == seqs[2:]
    assert read_all(fake, Position.after_sequence(seqs[1], 0)) == seqs[1:]  # inside a record: AT it
    assert read_all(fake, Position.at_timestamp(utc(20.0))) == seqs[1:]
    assert read_all(fake, Position.at_timestamp(utc(25.0))) == seqs[2:]
    latest = fake.get_shard_iterator("s", S0, Position.latest())
    assert fake.get_records(latest, 10, S0, "s").sequence_numbers == []
    later = fake.put_record("s", "k", b"new", shard_id=S0)["SequenceNumber"]
    assert fake.get_records(latest, 10, S0, "s").sequence_numbers == [later]


def test_retention_trims_records_and_shards_and_iterators_resume_at_the_oldest_record_left() -> None:
    fake, seqs = stream_of(10.0, 20.0, 30.0)
    at_first = fake.get_shard_iterator("s", S0, Position.trim_horizon())
    fake.split_shard("s", S0, HALF)
    fake.put_record("s", "k", b"x", shard_id=S1, arrival=50.0)
    assert fake.trim("s", before=25.0) == []  # S0 closed at 30.0: still listed
    assert fake.get_records(at_first, 10, S0, "s").sequence_numbers == seqs[2:]
    assert read_all(fake, Position.at_sequence(seqs[0])) == seqs[2:]
    assert fake.trim("s", before=40.0) == [S0]
    assert S0 not in {s["ShardId"] for s in fake.list_shards("s")}
    with pytest.raises(ShardNotFoundError, match=S0):
        fake.get_shard_iterator("s", S0, Position.trim_horizon())
    with pytest.raises(StreamNotFoundError, match="'t'"):
        fake.describe_stream("t")


# -- faults and calls ------------------------------------------------------------------------------------


def test_faults_fire_on_the_calls_named_and_every_call_is_counted() -> None:
    fake, seqs = stream_of(1.0, 2.0)
    fake.inject("get_records", ThrottledError("slow down"), calls=(2, 3))
    iterator = fake.get_shard_iterator("s", S0, Position.trim_horizon())
    assert fake.get_records(iterator, 1, S0, "s").sequence_numbers == seqs[:1]
    for _ in range(2):
        with pytest.raises(ThrottledError):
            fake.get_records(iterator, 1, S0, "s")
    assert fake.get_records(iterator, 1, S0, "s").sequence_numbers == seqs[:1]
    assert fake.count("get_records") == 4 and fake.count("get_records", S0) == 4
    assert [c.position for c in fake.calls_to("get_shard_iterator")] == [Position.trim_horizon()]
    fake.expire_iterators()
    with pytest.raises(IteratorExpiredError):
        fake.get_records(iterator, 1, S0, "s")
    fake.shard_filter = "rejected"
    with pytest.raises(InvalidRequestError, match="ShardFilter"):
        fake.list_shards("s", shard_filter={"Type": "AT_LATEST"})


def test_a_gate_holds_async_calls_until_opened() -> None:
    fake, seqs = stream_of(1.0)
    aio = fake.aio()
    gate = fake.inject("get_records", Gate(), shard_id=S0)

    async def scenario() -> None:
        async with aio:
            iterator = await aio.get_shard_iterator("s", S0, Position.trim_horizon())
            call = asyncio.create_task(aio.get_records(iterator, 10, S0, "s"))
            await asyncio.sleep(0.01)
            assert not call.done()
            gate.open()
            assert (await call).sequence_numbers == seqs

    asyncio.run(scenario())


# -- enhanced fan-out ------------------------------------------------------------------------------------


def registered(fake: FakeKinesis) -> str:
    consumer = fake.register_consumer(fake.describe_stream("s").arn, "app")
    assert consumer.status == "ACTIVE" and fake.register_consumer(consumer.stream_arn, "app") == consumer
    return consumer.arn


def test_subscriptions_continue_at_the_last_record_and_end_after_their_events() -> None:
    fake, seqs = stream_of(1.0, 2.0, 3.0)
    arn = registered(fake)
    fake.events_per_subscription, fake.records_per_event = 2, 2
    events = list(fake.subscribe(arn, S0, Position.trim_horizon()))
    assert [e.page.sequence_numbers for e in events] == [seqs[:2], seqs[2:]]
    assert [e.continuation_sequence_number for e in events] == [seqs[1], seqs[2]]
    again = list(fake.subscribe(arn, S0, Position.after_sequence(events[-1].continuation_sequence_number)))
    assert [len(e.page) for e in again] == [0, 0] and again[-1].continuation_sequence_number == seqs[2]
    assert fake.count("subscribe", S0) == 2 and fake.subscriptions_open == 0
    held = fake.subscribe(arn, S0, Position.trim_horizon())
    assert next(held).page.sequence_numbers == seqs[:2] and fake.subscriptions_open == 1
    held.close()  # the reader closing it early
    assert fake.subscriptions_open == 0
    with pytest.raises(ConsumerStreamMismatchError):
        next(fake.subscribe(arn, S0, Position.trim_horizon(), stream_arn=arn.replace("stream/s", "stream/t")))


def test_the_last_event_of_a_closed_shard_has_no_continuation_and_names_the_children() -> None:
    fake, seqs = stream_of(1.0, 2.0)
    arn = registered(fake)
    fake.split_shard("s", S0, HALF)
    fake.records_per_event = 1
    events = list(fake.subscribe(arn, S0, Position.trim_horizon()))
    assert [e.page.sequence_numbers for e in events] == [seqs[:1], seqs[1:]]
    assert [e.shard_ended for e in events] == [False, True] and events[-1].continuation_sequence_number is None
    assert [c.shard_id for c in events[-1].page.child_shards] == [S1, S2]

    async def subscribed() -> list[list[str]]:
        async with fake.aio() as aio:
            return [e.page.sequence_numbers async for e in aio.subscribe(arn, S0, Position.after_sequence(seqs[0]))]

    assert asyncio.run(subscribed()) == [seqs[1:]]
    assert fake.deregister_consumer(arn) and not fake.deregister_consumer(arn)
    assert fake.list_consumers(fake.describe_stream("s").arn) == []
