"""The Consumer without servers: a recording lease coordinator and a consumer wired to the fake Kinesis.

Shared by tests/unit/test_consumer_acks.py (polling) and tests/unit/test_consumer_efo.py
(enhanced fan-out): leases are handed to the reader's listener methods (``on_acquired``, ``on_lost``) directly, and every write
the consumer asks of the coordinator is recorded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fake_kinesis import FakeKinesis

from kinesis_src.consumer import Consumer, FetchPacing
from kinesis_src.consumer.stream_reader import StreamReader
from kinesis_src.errors import LeaseLostError
from kinesis_src.leases.model import Checkpoint, Lease
from lineage import HashRange

T = TypeVar("T")
WHOLE_RANGE = HashRange(0, 2**128 - 1)


def make_lease(shard_id: str, checkpoint: Checkpoint | None = None, counter: int = 1,
               hash_range: HashRange = WHOLE_RANGE) -> Lease:
    return Lease(shard_id, checkpoint or Checkpoint.trim_horizon(), hash_range, counter=counter, owner="me")


@dataclass
class RecordingCoordinator:
    """What the consumer asks of the lease coordinator, recorded; ``lose`` makes a shard's writes fail."""

    writes: list[tuple[str, str]] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    end_errors: dict[str, Exception] = field(default_factory=dict)  # shard_ended raises this
    released: list[str] = field(default_factory=list)
    end_counters: list[int | None] = field(default_factory=list)  # the lease counter each shard_ended named
    end_gate: threading.Event | None = None  # shard_ended (on a worker thread) waits for it
    checkpoint_gate: threading.Event | None = None  # checkpoint (on a worker thread) waits for it
    at_gate: int = 0  # writes waiting at a gate now: under way
    failure: BaseException | None = None
    live: bool = True
    fresh: bool = True
    delivered: dict[str, int] = field(default_factory=dict)  # records reported per shard (report_throughput)

    def is_live(self) -> bool:
        return self.live

    def view_is_fresh(self) -> bool:
        return self.fresh

    def checkpoint(self, shard_id: str, checkpoint: Checkpoint, counter: int | None = None) -> Lease:
        if self.checkpoint_gate is not None:
            self._wait_at(self.checkpoint_gate, "checkpoint")
        self._check(shard_id)
        self.writes.append((shard_id, str(checkpoint)))
        return make_lease(shard_id, checkpoint)

    def shard_ended(self, shard_id: str, children: Any, counter: int | None = None) -> None:
        if self.end_gate is not None:
            self._wait_at(self.end_gate, "SHARD_END")
        self.end_counters.append(counter)
        self._check(shard_id)
        if shard_id in self.end_errors:
            raise self.end_errors[shard_id]
        self.writes.append((shard_id, "SHARD_END " + ",".join(c.shard_id for c in children)))

    def release(self, shard_id: str) -> bool:
        self.released.append(shard_id)
        return True

    # the consumer awaits these on its loop; a gate is waited for on a worker thread, as the real
    # coordinator's table calls are, so the loop goes on meanwhile

    async def acheckpoint(self, shard_id: str, checkpoint: Checkpoint, counter: int | None = None) -> Lease:
        return await asyncio.to_thread(self.checkpoint, shard_id, checkpoint, counter)

    async def ashard_ended(self, shard_id: str, children: Any, counter: int | None = None) -> None:
        await asyncio.to_thread(self.shard_ended, shard_id, children, counter)

    async def arelease(self, shard_id: str) -> bool:
        return self.release(shard_id)

    async def astop(self, release: bool = True) -> None:
        return None

    def report_throughput(self, shard_id: str, records: int, nbytes: int) -> None:
        self.delivered[shard_id] = self.delivered.get(shard_id, 0) + records

    def stop(self) -> None:
        return None

    def _wait_at(self, gate: threading.Event, what: str) -> None:
        self.at_gate += 1
        try:
            assert gate.wait(5), f"the test never opened the {what} gate"
        finally:
            self.at_gate -= 1

    def _check(self, shard_id: str) -> None:
        if shard_id in self.lost:
            raise LeaseLostError(f"lost {shard_id}", shard_id)


def make_consumer(
    kinesis: FakeKinesis, *, check_retention: bool = False, **options: Any
) -> tuple[Consumer, RecordingCoordinator]:
    """A Consumer of stream "orders" on the fake's async twin, its coordinator recorded, pacing off."""
    consumer = Consumer("orders", application_name="app", region="us-east-1", worker_id="me",
                        pacing=FetchPacing(idle_interval_s=0, min_interval_s=0), check_retention=check_retention,
                        kinesis=kinesis.aio(), **options)
    coordinator = RecordingCoordinator()
    only(consumer).coordinator = coordinator  # type: ignore[assignment]
    return consumer, coordinator


def take(reader: StreamReader, lease: Lease) -> None:
    """What the coordinator does on a take: hold the lease in the reader's held set, then tell the reader."""
    reader.held.hold(lease, 0.0)
    reader.on_acquired(lease)


def only(consumer: Consumer) -> StreamReader:
    """The consumer's one stream reader (its leases, holdings and acknowledgements)."""
    (reader,) = consumer.readers.values()
    return reader


def watch_ends(consumer: Consumer) -> None:
    """What the consumer's housekeeping does every half second."""
    only(consumer).acks.watch_ends(asyncio.get_running_loop().time())


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 10))


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


def awaiting(fn: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """An async stand-in answering what ``fn()`` answers (a reading of heartbeats, a beat)."""
    async def call() -> T:
        return fn()

    return call
