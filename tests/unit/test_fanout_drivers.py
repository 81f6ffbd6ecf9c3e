"""The fan-out drivers (sync for Spark tasks, async for the Consumer) over scripted subscriptions.

A scripted FanOut answers each subscribe() with the next list of events, so a test says exactly
where a subscription ends, breaks off or reaches the shard's end, and checks where the driver
subscribes next.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any, AsyncIterator, Iterator

import pytest

from kinesis_src.aws.fanout import FanOutEvent
from kinesis_src.errors import EndpointUnreachableError
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard, RecordPage
from kinesis_src.retrieval.async_fanout import FanOutFetcher
from kinesis_src.retrieval.cursor import StopReason
from kinesis_src.retrieval.fanout import FanOutReader, resubscribe_position

SHARD = "shardId-000000000000"
CHILD = ChildShard("shardId-000000000001", (SHARD,), 0, 10)
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders/consumer/app:1"
BROKEN = object()  # in a script: the event stream breaks off here


def event(*seqs: int, end: bool = False, lag: int = 0) -> FanOutEvent:
    continuation = None if end else (f"{seqs[-1]:05d}" if seqs else "0")
    page = RecordPage(
        partition_keys=[f"k{s}" for s in seqs], data=[b"d%d" % s for s in seqs],
        sequence_numbers=[f"{s:05d}" for s in seqs], arrival_epoch=[1000.0 + s for s in seqs],
        encryption_types=[None for _ in seqs], next_iterator=continuation, millis_behind_latest=lag,
        child_shards=(CHILD,) if end else (),
    )
    return FanOutEvent(page, continuation)


class ScriptedFanOut:
    """subscribe() returns the next scripted subscription; records where each started."""

    def __init__(self, *subscriptions: list[Any]) -> None:
        self.script = list(subscriptions)
        self.starts: list[Position] = []
        self.closed = 0

    def _next(self, consumer_arn: str, shard_id: str, position: Position) -> list[Any]:
        assert consumer_arn == ARN and shard_id == SHARD
        self.starts.append(position)
        assert self.script, f"unexpected subscription at {position}"
        return self.script.pop(0)

    def subscribe(self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None) -> Iterator[FanOutEvent]:
        events = self._next(consumer_arn, shard_id, position)

        def run() -> Iterator[FanOutEvent]:
            try:
                for item in events:
                    if item is BROKEN:
                        raise EndpointUnreachableError("the event stream broke off")
                    yield item
            finally:
                self.closed += 1

        return run()


class AsyncScriptedFanOut(ScriptedFanOut):
    def subscribe(self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None) -> AsyncIterator[FanOutEvent]:  # type: ignore[override]
        events = self._next(consumer_arn, shard_id, position)

        async def run() -> AsyncIterator[FanOutEvent]:
            try:
                for item in events:
                    if item is BROKEN:
                        raise EndpointUnreachableError("the event stream broke off")
                    yield item
            finally:
                self.closed += 1

        return run()


def reader(fanout: ScriptedFanOut, start: Position | None = None) -> FanOutReader:
    return FanOutReader(fanout, ARN, "orders", SHARD, start or Position.trim_horizon(), sleep=lambda s: None)  # type: ignore[arg-type]


def seqs(read: Any) -> list[str]:
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
    fanout = ScriptedFanOut([event(1, 2, lag=500)], [event(3, lag=0)])
    read = reader(fanout).read(until_caught_up=True)
    assert seqs(read) == ["00001", "00002", "00003"] and read.stop_reason is StopReason.CAUGHT_UP
    assert fanout.starts == [Position.trim_horizon(), Position.after_sequence("00002")]
    assert fanout.closed == 2  # the ended one, and the read's own at its stop


def test_a_read_stops_exactly_at_a_recorded_end_for_replay() -> None:
    fanout = ScriptedFanOut([event(1, 2, lag=900), event(3, 4, lag=900)])
    r = reader(fanout)
    read = r.read(end_sequence="00003")
    assert seqs(read) == ["00001", "00002", "00003"] and read.stop_reason is StopReason.END_SEQUENCE
    assert r.position == Position.after_sequence("00003")


def test_max_records_cuts_an_event_and_the_next_read_resubscribes_after_the_cut() -> None:
    fanout = ScriptedFanOut([event(1, 2, 3, lag=900)], [event(3, 4, lag=0)])
    r = reader(fanout)
    first = r.read(max_records=2)
    assert seqs(first) == ["00001", "00002"] and first.stop_reason is StopReason.RECORD_LIMIT
    second = r.read(until_caught_up=True)
    assert seqs(second) == ["00003", "00004"]
    assert fanout.starts[1] == Position.after_sequence("00002")


def test_the_shard_end_event_ends_the_read_with_its_children() -> None:
    read = reader(ScriptedFanOut([event(1, lag=900), event(2, end=True)])).read(until_caught_up=True)
    assert seqs(read) == ["00001", "00002"] and read.shard_ended and read.child_shards == (CHILD,)


def test_a_broken_event_stream_resubscribes_where_the_cursor_stands_and_gives_up_after_five() -> None:
    fanout = ScriptedFanOut([event(1, lag=900), BROKEN], [event(2, lag=0)])
    read = reader(fanout).read(until_caught_up=True)
    assert seqs(read) == ["00001", "00002"] and fanout.starts[1] == Position.after_sequence("00001")
    with pytest.raises(EndpointUnreachableError):
        reader(ScriptedFanOut(*[[BROKEN] for _ in range(5)])).read(until_caught_up=True)


# -- the async driver (the Consumer) -------------------------------------------------------------


def fetcher(fanout: AsyncScriptedFanOut, start: Position, delivered: list[RecordPage], ended: list[RecordPage],
            expired: list[tuple[str, str, str]]) -> FanOutFetcher:
    async def deliver(page: RecordPage) -> None:
        delivered.append(page)

    async def on_end(page: RecordPage) -> None:
        ended.append(page)

    async def on_expired(shard: str, checkpointed: str, oldest: str) -> None:
        expired.append((shard, checkpointed, oldest))

    return FanOutFetcher(fanout, ARN, "orders", SHARD, start, deliver=deliver, on_end=on_end, on_expired=on_expired)  # type: ignore[arg-type]


def test_the_consumer_driver_delivers_resubscribes_and_hands_the_final_page_to_on_end() -> None:
    fanout = AsyncScriptedFanOut([event(1, 2), event()], [BROKEN], [event(3), event(4, end=True)])
    delivered: list[RecordPage] = []
    ended: list[RecordPage] = []
    f = fetcher(fanout, Position.trim_horizon(), delivered, ended, [])
    asyncio.run(asyncio.wait_for(f.run(), 10))
    assert [p.sequence_numbers for p in delivered] == [["00001", "00002"], [], ["00003"]]  # the empty one: lag news
    assert [p.sequence_numbers for p in ended] == [["00004"]] and ended[0].child_shards == (CHILD,)
    assert fanout.starts == [Position.trim_horizon(), Position.after_sequence("00002"), Position.after_sequence("00002")]
    assert f.subscriptions == 3 and fanout.closed == 3


def test_the_consumer_driver_reports_a_checkpoint_trimmed_past_retention() -> None:
    fanout = AsyncScriptedFanOut([event(12, 13), event(14, end=True)])
    expired: list[tuple[str, str, str]] = []
    delivered: list[RecordPage] = []
    asyncio.run(asyncio.wait_for(fetcher(fanout, Position.after_sequence("00007", 0), delivered, [], expired).run(), 10))
    assert expired == [(SHARD, "00007", "00012")]
    assert delivered[0].sequence_numbers == ["00012", "00013"]


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
