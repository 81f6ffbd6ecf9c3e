"""Lease writes under way, and decoding that waits for them: the Consumer's fix for a GIL convoy.

Checkpoints and SHARD_END go through the sync lease coordinator on a worker
thread, which must get the GIL back at every blocking step of a DynamoDB
call; the event loop's decode of a large GetRecords body is one C call that
holds the GIL throughout. So each step of a write waited for a whole
decode, and since the application awaits its checkpoint, that bounded the
Consumer's rate. :class:`WritesUnderWay` counts those writes; the Kinesis
client's parser awaits :meth:`WritesUnderWay.quiet` before each decode.
The hold applies only while the application has a batch to go on with
(``has_work``, :meth:`wake`) and for at most ``max_wait_s``, so a slow
DynamoDB never stops fetching. Measured: docs/performance.md, "Lease writes
and the GIL".
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
