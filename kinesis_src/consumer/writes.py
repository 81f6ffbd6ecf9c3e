"""Lease writes under way, and decoding that waits for them: the Consumer's fix for a GIL convoy.

Checkpoints and SHARD_END go through the sync lease coordinator on a worker
thread (``asyncio.to_thread``). Each DynamoDB call there gives the GIL up at
every blocking step (send, each receive) and must get it back each time.
Meanwhile the event loop decodes GetRecords bodies: ``json.loads`` of a
10,000-record page is one C call that holds the GIL for tens of
milliseconds and never hands it over half-way. So every step of the write
waited for a whole decode: a 14 ms write took 190-260 ms with the loop busy
decoding (measured on the dev box, DynamoDB Local), and since the
application awaits its checkpoint, that wait bounded the Consumer's rate.

:class:`WritesUnderWay` counts those writes; the Kinesis client's parser
awaits :meth:`WritesUnderWay.quiet` before each decode, so a write runs
while the loop has nothing to decode and takes its own round trip. Holding a
decode back is free only while the application has a batch to go on with:
once the consumer's queue is empty, the application waits for a page, so
decoding goes ahead (``has_work``; the consumer calls :meth:`wake` when the
application takes the last queued batch). The wait is also bounded
(``max_wait_s``): a DynamoDB that retries for seconds never stops fetching.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Callable, Iterator

MAX_WAIT_S = 0.5


class WritesUnderWay:
    """How many lease writes are in flight; ``await quiet()`` returns when decoding should wait no more.

    Used on the event loop only: :meth:`writing` wraps the ``await`` of the
    thread doing the write, not the thread itself.
    """

    def __init__(self, max_wait_s: float = MAX_WAIT_S, has_work: Callable[[], bool] = lambda: True) -> None:
        self.max_wait_s = max_wait_s
        self.has_work = has_work  # the application has a batch to go on with
        self.count = 0
        self.held_back = 0  # decodes that waited (a figure for benchmarks and tests)
        self._changed = asyncio.Event()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self.wake()

    def wake(self) -> None:
        """Something ``quiet()`` waits on changed: the last write ended, or the application ran out of batches."""
        self._changed.set()

    async def quiet(self) -> None:
        """Return once no write is under way or the application has nothing left to do, or after ``max_wait_s``."""
        if not self._holding():
            return
        self.held_back += 1
        try:  # not asyncio.wait_for: in Python 3.11 it loses a cancel that meets the wake-up
            async with asyncio.timeout(self.max_wait_s):
                while self._holding():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            pass

    def _holding(self) -> bool:
        return self.count > 0 and self.has_work()
