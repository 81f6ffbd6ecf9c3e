"""Read independent shards at the same time, and hand their chunks out in a fixed order.

A bounded lineage read (:mod:`.drain`) goes in waves: every shard whose
parents are drained can be read now, and none of them depends on another.
Reading them one after another makes a bounded read as slow as one shard,
because Kinesis paces each shard (5 calls/s, 2 MB/s) however many there are.
:func:`read_in_order` reads a wave with a thread per shard (up to
``workers``), and yields each shard's chunks in the wave's order: all of the
first shard's, then the second's, so the output is the same, record for
record, as the sequential read's.

Memory stays bounded: a reader thread takes a slot before each chunk and the
consumer gives it back when it has yielded that chunk, so at most
``buffered_chunks`` chunks wait at any time. The shard being handed out
needs no slot (its chunks leave as they come), so a full buffer of later
shards can never block the one the consumer waits for. A reader error is raised when
its shard's turn comes, so the chunks before it are delivered first. Closing
the generator early (``read | head``) stops every reader at its next chunk.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, TypeVar

C = TypeVar("C")  # a chunk

DEFAULT_WORKERS = 16
DEFAULT_BUFFERED_CHUNKS = 64


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
    buffered_chunks: int = DEFAULT_BUFFERED_CHUNKS,
) -> Iterator[C | ShardDone]:
    """Each shard's chunks, then its :class:`ShardDone`, shard after shard in ``shard_ids`` order.

    ``read(shard_id)`` yields a shard's chunks (it runs in a worker thread).
    """
    if workers < 1 or buffered_chunks < 1:
        raise ValueError(f"workers and buffered_chunks must be >= 1, got {workers}, {buffered_chunks}")
    if len(shard_ids) <= 1 or workers == 1:
        yield from _sequential(shard_ids, read)
        return
    slots = threading.Semaphore(buffered_chunks)
    stop = threading.Event()
    turn = _Turn(shard_ids[0])
    queues: dict[str, queue.Queue[object]] = {sid: queue.Queue() for sid in shard_ids}

    def run(shard_id: str) -> None:
        out = queues[shard_id]
        try:
            chunks = read(shard_id)
            while True:
                slotted = _take(slots, stop, turn, shard_id)
                if slotted is None:
                    return
                try:
                    chunk = next(chunks)
                except StopIteration:
                    if slotted:
                        slots.release()
                    break
                out.put(_Chunk(chunk, slotted))
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
            turn.now(sid)
            yield from _drain_queue(queues[sid], slots)
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


class _Turn:
    """Whose chunks the consumer is handing out now (one attribute, read by the worker threads)."""

    def __init__(self, shard_id: str) -> None:
        self.shard_id = shard_id

    def now(self, shard_id: str) -> None:
        self.shard_id = shard_id


@dataclass(frozen=True)
class _Chunk:
    chunk: object
    slotted: bool  # took a buffer slot, given back once yielded


def _take(slots: threading.Semaphore, stop: threading.Event, turn: _Turn, shard_id: str) -> bool | None:
    """True: a buffer slot was taken; False: no slot needed (the shard's turn); None: the consumer left."""
    while not stop.is_set():
        if turn.shard_id == shard_id:
            return False
        if slots.acquire(timeout=0.05):
            return True
    return None


def _drain_queue(items: queue.Queue[object], slots: threading.Semaphore) -> Iterator:  # type: ignore[type-arg]
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
            if item.slotted:
                slots.release()


def _sequential(
    shard_ids: Sequence[str], read: Callable[[str], Iterator[C]]
) -> Iterator[C | ShardDone]:
    for sid in shard_ids:
        yield from read(sid)
        yield ShardDone(sid)
