"""The fan-out drivers (sync for Spark tasks, async for the Consumer) on the shared fake Kinesis.

The fake's knobs say where a subscription ends (``events_per_subscription``), how many records an
event carries (``records_per_event``, ``shard.page_sizes``), where the event stream breaks off
(``inject("subscribe_event", ...)``) and where the shard ends (a split); its call log says where
the driver subscribed each time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from fake_kinesis import MAX_HASH_KEY, START, FakeKinesis, shard_id

from kinesis_src.errors import EndpointUnreachableError
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard, RecordPage
from kinesis_src.retrieval import async_fanout
from kinesis_src.retrieval.async_fanout import FanOutFetcher
from kinesis_src.retrieval.cursor import StopReason
from kinesis_src.retrieval.fanout import FanOutReader, resubscribe_position
from kinesis_src.retrieval.subscriptions import TAKEN_OVER_PAUSE_S

STREAM = "orders"
SHARD, LEFT, RIGHT = (shard_id(i) for i in range(3))
HALF = 2**127

pytestmark = pytest.mark.timeout(60)  # a driver resubscribing forever fails here, not after the default 600 s


def stream_of(n: int, *, per_event: int, closed: bool = False) -> tuple[FakeKinesis, str, list[str]]:
    """Stream "orders" with one shard of ``n`` records (one a second), an event carrying ``per_event``
    of them, and a registered consumer; ``closed`` splits the shard after the records.
    Returns the fake, the consumer's ARN and the records' sequence numbers."""
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    seqs = [fake.put_record(STREAM, f"k{i}", b"d%d" % i, shard_id=SHARD, arrival=START + i)["SequenceNumber"]
            for i in range(n)]
    if closed:
        fake.split_shard(STREAM, SHARD, HALF)
    fake.records_per_event = per_event
    return fake, fake.register_consumer(fake.stream(STREAM).arn, "app").arn, seqs


def starts(fake: FakeKinesis) -> list[Position | None]:
    """Where each subscription started."""
    return [c.position for c in fake.calls_to("subscribe", SHARD)]


CHILDREN = (ChildShard(LEFT, (SHARD,), 0, HALF - 1), ChildShard(RIGHT, (SHARD,), HALF, MAX_HASH_KEY))


def broken() -> EndpointUnreachableError:
    return EndpointUnreachableError("the event stream broke off")


def reader(fake: FakeKinesis, arn: str, start: Position | None = None,
           sleeps: list[float] | None = None) -> FanOutReader:
    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return FanOutReader(fake.fan_out(), arn, STREAM, SHARD, start or Position.trim_horizon(),  # type: ignore[arg-type]
                        stream_arn=fake.stream(STREAM).arn, sleep=sleep)


def seqs_of(read: Any) -> list[str]:
    return [r.sequence_number for r in read.records()]


# -- where to resubscribe ------------------------------------------------------------------------


def test_latest_adopts_the_continuation_and_every_other_start_stays_where_the_cursor_is() -> None:
    after = Position.after_sequence("00007")
    assert resubscribe_position(Position.latest(), "00042") == Position.after_sequence("00042")
    assert resubscribe_position(Position.latest(), "0") == Position.latest()  # LocalStack's "nothing yet"
    assert resubscribe_position(Position.latest(), None) == Position.latest()
    assert resubscribe_position(Position.trim_horizon(), "00042") == Position.trim_horizon()
    assert resubscribe_position(after, "00042") == after  # the cursor knows what was delivered


# -- the sync driver (Spark tasks) ---------------------------------------------------------------


def test_a_read_resubscribes_after_the_last_record_when_a_subscription_ends_and_closes_when_done() -> None:
    fake, arn, seqs = stream_of(3, per_event=2)
    fake.events_per_subscription = 1  # the first subscription ends after [1, 2], behind the tip
    r = reader(fake, arn)
    read = r.read(until_caught_up=True)
    assert seqs_of(read) == seqs and read.stop_reason is StopReason.CAUGHT_UP
    assert starts(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[1])]
    assert r.subscriptions == 2 and fake.subscriptions_open == 0  # the read closed its own at its stop


def test_latest_resubscribes_at_the_continuation_so_records_put_between_subscriptions_are_read() -> None:
    fake, arn, seqs = stream_of(2, per_event=10)
    r = reader(fake, arn, Position.latest())
    assert seqs_of(r.read(until_caught_up=True)) == [] and r.position == Position.latest()
    put = fake.put_record(STREAM, "k", b"new", shard_id=SHARD)["SequenceNumber"]
    assert seqs_of(r.read(until_caught_up=True)) == [put]
    assert starts(fake) == [Position.latest(), Position.after_sequence(seqs[-1])]  # the first event's continuation


def test_a_read_stops_exactly_at_a_recorded_end_for_replay() -> None:
    fake, arn, seqs = stream_of(4, per_event=2)
    r = reader(fake, arn)
    read = r.read(end_sequence=seqs[2])
    assert seqs_of(read) == seqs[:3] and read.stop_reason is StopReason.END_SEQUENCE
    assert r.position == Position.after_sequence(seqs[2]) and fake.subscriptions_open == 0


def test_max_records_cuts_an_event_and_the_next_read_resubscribes_after_the_cut() -> None:
    fake, arn, seqs = stream_of(4, per_event=3)
    r = reader(fake, arn)
    first = r.read(max_records=2)
    assert seqs_of(first) == seqs[:2] and first.stop_reason is StopReason.RECORD_LIMIT
    second = r.read(until_caught_up=True)
    assert seqs_of(second) == seqs[2:] and second.stop_reason is StopReason.CAUGHT_UP
    assert starts(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[1])]


def test_the_shard_end_event_ends_the_read_with_its_children() -> None:
    fake, arn, seqs = stream_of(2, per_event=1, closed=True)
    r = reader(fake, arn)
    read = r.read(until_caught_up=True)
    assert seqs_of(read) == seqs and read.shard_ended and read.child_shards == CHILDREN
    assert r.shard_ended and fake.subscriptions_open == 0


def test_a_broken_event_stream_resubscribes_where_the_cursor_stands_and_gives_up_after_five() -> None:
    fake, arn, seqs = stream_of(2, per_event=1)
    fake.inject("subscribe_event", broken(), shard_id=SHARD, calls=(2,))  # after the first event
    sleeps: list[float] = []
    read = reader(fake, arn, sleeps=sleeps).read(until_caught_up=True)
    assert seqs_of(read) == seqs and starts(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[0])]
    assert sleeps == [1.0] and fake.subscriptions_open == 0

    fake, arn, seqs = stream_of(7, per_event=1)  # six breaks, an event between each two
    fake.inject("subscribe_event", broken(), shard_id=SHARD, calls=range(2, 13, 2))
    assert seqs_of(reader(fake, arn).read(until_caught_up=True)) == seqs and fake.count("subscribe") == 7

    fake, arn, _ = stream_of(1, per_event=1)
    fake.inject("subscribe_event", broken(), shard_id=SHARD, calls=range(1, 100))
    sleeps = []
    with pytest.raises(EndpointUnreachableError):
        reader(fake, arn, sleeps=sleeps).read(until_caught_up=True)
    assert fake.count("subscribe") == 5 and sleeps == [1.0, 2.0, 3.0, 4.0]
    assert starts(fake) == [Position.trim_horizon()] * 5


def test_a_subscription_taken_over_by_another_reader_resubscribes_where_the_cursor_stands() -> None:
    """Another reader of the same consumer subscribes the shard 5 s or more later (a task's retry or a
    speculative copy): AWS fails this reader's event stream with ResourceInUseException. The task
    pauses and resubscribes after its last record instead of failing (it failed before)."""
    fake, arn, seqs = stream_of(3, per_event=1)
    fake.concurrent_subscriptions = "takeover"
    sleeps: list[float] = []
    r = reader(fake, arn, sleeps=sleeps)
    first = r.step()
    assert list(first.page.sequence_numbers) == seqs[:1]
    fake.advance(5.0)
    other = fake.subscribe(arn, SHARD, Position.latest())
    next(other)  # takes the pair over: this reader's next event fails
    other.close()
    rest = r.read(until_caught_up=True)
    assert seqs_of(rest) == seqs[1:]
    assert starts(fake) == [Position.trim_horizon(), Position.latest(), Position.after_sequence(seqs[0])]
    assert sleeps == [TAKEN_OVER_PAUSE_S] and fake.subscriptions_open == 0


# -- the async driver (the Consumer) -------------------------------------------------------------


def fetcher(fake: FakeKinesis, arn: str, start: Position, delivered: list[RecordPage], ended: list[RecordPage],
            expired: list[tuple[str, str, str]]) -> FanOutFetcher:
    async def deliver(page: RecordPage) -> None:
        delivered.append(page)

    async def on_end(page: RecordPage) -> None:
        ended.append(page)

    async def on_expired(shard: str, checkpointed: str, oldest: str) -> None:
        expired.append((shard, checkpointed, oldest))

    return FanOutFetcher(fake.aio().fan_out(), arn, STREAM, SHARD, start, deliver=deliver, on_end=on_end,  # type: ignore[arg-type]
                         on_expired=on_expired, stream_arn=fake.stream(STREAM).arn)


def run(f: FanOutFetcher, fake: FakeKinesis) -> None:
    async def to_the_end() -> None:
        await f.run()
        assert fake.subscriptions_open == 0  # closed by the driver, not left to the loop's finalizer

    asyncio.run(asyncio.wait_for(to_the_end(), 10))


def test_the_consumer_driver_delivers_resubscribes_and_hands_the_final_page_to_on_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(async_fanout, "BROKEN_PAUSE_S", 0.0)
    fake, arn, seqs = stream_of(4, per_event=10, closed=True)
    fake.events_per_subscription = 2
    fake.shard(STREAM, SHARD).page_sizes = [2, 0, 1, 1]  # [1, 2], [] (lag news); then [3], [4] and the end
    fake.inject("subscribe_event", broken(), shard_id=SHARD, calls=(3,))  # the second subscription breaks off
    delivered: list[RecordPage] = []
    ended: list[RecordPage] = []
    f = fetcher(fake, arn, Position.trim_horizon(), delivered, ended, [])
    run(f, fake)
    assert [p.sequence_numbers for p in delivered] == [seqs[:2], [], seqs[2:3]]
    assert delivered[1].millis_behind_latest is not None  # what an empty event is delivered for
    assert [p.sequence_numbers for p in ended] == [seqs[3:]] and ended[0].child_shards == CHILDREN
    assert starts(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[1]), Position.after_sequence(seqs[1])]
    assert f.subscriptions == 3


def test_the_consumer_driver_reports_a_checkpoint_trimmed_past_retention() -> None:
    fake, arn, seqs = stream_of(5, per_event=2, closed=True)
    checkpoint = Position.after_sequence(seqs[1], 0)  # the KCL's resume: AT the checkpointed record
    kept: list[RecordPage] = []
    expired: list[tuple[str, str, str]] = []
    run(fetcher(fake, arn, checkpoint, kept, [], expired), fake)
    assert expired == [] and kept[0].sequence_numbers == seqs[2:3]  # still there: read AT it, dropped

    fake.trim(STREAM, before=START + 2)  # records 0 and 1 are gone
    delivered: list[RecordPage] = []
    ended: list[RecordPage] = []
    run(fetcher(fake, arn, checkpoint, delivered, ended, expired), fake)
    assert expired == [(SHARD, seqs[1], seqs[2])]
    assert delivered[0].sequence_numbers == seqs[2:4] and ended[0].sequence_numbers == seqs[4:]
    assert starts(fake)[-1] == checkpoint


# -- Spark's SIGTERM ------------------------------------------------------------------------------


def test_sigterm_unwinds_through_finally_once_and_a_second_one_cannot_cut_the_cleanup_short(tmp_path: Any) -> None:
    """What Spark's streaming-source runner does: ``try: serve() finally: reader.stop()``."""
    marker = tmp_path / "marker"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        from kinesis_src.spark.shutdown import stop_on_sigterm
        assert stop_on_sigterm()
        try:
            open({str(marker)!r}, "w").write("ready")
            time.sleep(60)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the JVM sends it twice
            open({str(marker)!r}, "w").write("stopped")
    """)
    process = subprocess.Popen([sys.executable, "-c", script], env={**os.environ})
    try:
        from waiting import wait_for

        wait_for(lambda: marker.exists() and marker.read_text() == "ready", 30, "the child to start")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        process.kill()
    assert marker.read_text() == "stopped"
