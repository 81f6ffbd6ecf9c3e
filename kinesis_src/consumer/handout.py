"""What a running Consumer's parts share: the queue of batches to the application, and its bounds.

Readers put batches here and ``Consumer.__anext__`` takes them; it also holds the batch in hand,
the stop flag, the first failure and the open async clients (docs/architecture.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from ..aws.async_kinesis import AsyncKinesisClient
    from .batch import Batch
    from .shard_state import HeldShard

WAKE = object()
"""Queue sentinel: wake ``__anext__`` for a stop or a failure."""


class Handout:
    """The consumer's shared running state; used on its event loop only (``request_stop`` hops there)."""

    def __init__(self, kinesis: AsyncKinesisClient | None = None) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.in_flight: Batch | None = None  # the batch in the application's hands
        self.stopping = False
        self.failure: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.kinesis = kinesis  # open between start() and close(), or given by the caller
        self.dynamodb: AsyncDynamoDB | None = None  # the lease and claim writes' client (open likewise)
        self._progress = asyncio.Event()  # set whenever the in-flight batch changes or is acknowledged

    def enqueue(self, batch: Batch) -> None:
        self.queue.put_nowait(batch)

    def fail(self, error: BaseException) -> None:
        """Keep the first failure and wake the application, which raises it."""
        if self.failure is None:
            self.failure = error
            self.queue.put_nowait(WAKE)

    def request_stop(self) -> bool:
        """Stop handing out batches; True the first time."""
        first = not self.stopping
        self.stopping = True
        self.queue.put_nowait(WAKE)
        return first

    def set_in_flight(self, batch: Batch | None) -> None:
        self.in_flight = batch
        self._progress.set()

    def progressed(self) -> None:
        """A checkpoint landed or the batch in hand changed: wake a release waiting for it."""
        self._progress.set()

    async def until_not_in_flight(self, shard: HeldShard, stream: str) -> None:
        """Until the application's batch is not one of this holding's unacknowledged ones."""
        while True:
            batch = self.in_flight
            if batch is None or batch.stream != stream or batch.generation != shard.generation or shard.state.terminal:
                return
            if batch.index <= shard.state.acknowledged:
                return
            self._progress.clear()
            await self._progress.wait()

    def now(self) -> float:
        return self.loop.time() if self.loop is not None else asyncio.get_running_loop().time()
