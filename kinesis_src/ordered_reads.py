"""Read independent shards at the same time, and hand their chunks out in a fixed order.

Read-ahead is bounded by weight (docs/performance.md, "Bounded reads").
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, TypeVar

C = TypeVar("C")  # a chunk

DEFAULT_WORKERS = 16
DEFAULT_BUFFER = 64  # chunks, with the default weight of 1 per chunk


@dataclass(frozen=True)
class ShardDone:
    """The end of one shard's chunks: the caller may judge the shard now."""

    shard_id: str


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_END = object()


def read_in_order(
    shard_ids: Sequence[str],
    read: Callable[[str], Iterator[C]],
    *,
    workers: int = DEFAULT_WORKERS,
    buffer: int = DEFAULT_BUFFER,
    weigh: Callable[[C], int] = lambda chunk: 1,
) -> Iterator[C | ShardDone]:
    """Each shard's chunks, then its :class:`ShardDone`, shard after shard in ``shard_ids`` order.

    ``buffer`` bounds the total ``weigh(chunk)`` read ahead, never charged to the current shard.
    A reader's error is raised at its shard's turn; closing stops every reader.
    """

    if workers < 1 or buffer < 1:
        raise ValueError(f"workers and buffer must be >= 1, got {workers}, {buffer}")
    if len(shard_ids) <= 1 or workers == 1:
        yield from _sequential(shard_ids, read)
        return
    budget = _Budget(buffer, shard_ids[0])
    stop = threading.Event()
    queues: dict[str, queue.Queue[object]] = {sid: queue.Queue() for sid in shard_ids}

    def run(shard_id: str) -> None:
        out = queues[shard_id]
        try:
            for chunk in read(shard_id):
                charged = budget.admit(shard_id, weigh(chunk), stop)
                if charged is None:
                    return
                out.put(_Chunk(chunk, charged))
            out.put(ShardDone(shard_id))
        except BaseException as exc:  # handed to the consumer at this shard's turn
            out.put(_Failed(exc))
        finally:
            out.put(_END)

    pool = ThreadPoolExecutor(max_workers=min(workers, len(shard_ids)), thread_name_prefix="kinesis-src-read")
    try:
        for sid in shard_ids:
            pool.submit(run, sid)
        for sid in shard_ids:
            budget.turn(sid)
            yield from _drain_queue(queues[sid], budget)
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


class _Budget:
    """The weight of chunks read ahead, and whose chunks the consumer hands out now (never charged)."""

    def __init__(self, limit: int, first: str) -> None:
        self.limit = limit
        self.used = 0
        self.current = first
        self.changed = threading.Condition()

    def turn(self, shard_id: str) -> None:
        with self.changed:
            self.current = shard_id
            self.changed.notify_all()

    def admit(self, shard_id: str, weight: int, stop: threading.Event) -> int | None:
        """The weight charged (0 on the shard's turn), once there is room; None: the consumer left."""
        with self.changed:
            while not stop.is_set():
                if self.current == shard_id:
                    return 0
                if self.used < self.limit:
                    self.used += weight
                    return weight
                self.changed.wait(0.05)  # stop is an Event, not a notify: look again soon
        return None

    def give_back(self, weight: int) -> None:
        if weight:
            with self.changed:
                self.used -= weight
                self.changed.notify_all()


@dataclass(frozen=True)
class _Chunk:
    chunk: object
    charged: int  # weight taken from the budget, given back once yielded


def _drain_queue(items: queue.Queue[object], budget: _Budget) -> Iterator:  # type: ignore[type-arg]
    while True:
        item = items.get()
        if item is _END:
            return
        if isinstance(item, _Failed):
            raise item.error
        if isinstance(item, ShardDone):
            yield item
            continue
        assert isinstance(item, _Chunk)
        try:
            yield item.chunk
        finally:
            budget.give_back(item.charged)


def _sequential(
    shard_ids: Sequence[str], read: Callable[[str], Iterator[C]]
) -> Iterator[C | ShardDone]:
    for sid in shard_ids:
        yield from read(sid)
        yield ShardDone(sid)
