"""The consumer for scripts without asyncio: the same :class:`Consumer`, its loop on a thread.

Fetching and leases carry on while the script processes a batch; ``Ctrl-C`` and SIGTERM end the
``for`` loop and release the leases on the way out of the ``with`` block."""

from __future__ import annotations

import asyncio
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import FrameType
from typing import Any, Callable, Coroutine, Iterator, Self, Sequence, TypeVar

from ..records import Record, RecordPage
from .batch import Batch
from .consumer import Consumer
from .consumer_config import ConsumerConfig
from .metrics import ConsumerMetrics
from .processing import DeliveredRecord, ProcessingMetrics, process

T = TypeVar("T")


class BlockingBatch:
    """A :class:`Batch` whose ``checkpoint()`` blocks until the checkpoint is written."""

    def __init__(self, batch: Batch, run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self.batch = batch
        self._run = run

    @property
    def records(self) -> list[Record]:
        return self.batch.records

    @property
    def stream(self) -> str:
        return self.batch.stream

    @property
    def shard_id(self) -> str:
        return self.batch.shard_id

    @property
    def page(self) -> RecordPage:
        return self.batch.page

    @property
    def millis_behind_latest(self) -> int | None:
        return self.batch.millis_behind_latest

    @property
    def ends_shard(self) -> bool:
        """Always checkpoint a batch that says this; see :attr:`Batch.ends_shard`."""
        return self.batch.ends_shard

    @property
    def last_sequence_number(self) -> str | None:
        return self.batch.last_sequence_number

    def __len__(self) -> int:
        return len(self.batch)

    def to_arrow(self) -> Any:
        return self.batch.to_arrow()

    def checkpoint(self, record: Record | None = None) -> None:
        """See :meth:`Batch.checkpoint`: the whole batch, or up to and including ``record``."""
        self._run(self.batch.checkpoint(record))


class BlockingConsumer:
    """``with BlockingConsumer(...) as consumer: for batch in consumer: ...; batch.checkpoint()``.
    Takes exactly the arguments of :class:`Consumer`."""

    def __init__(self, stream_name: str | Sequence[str] | ConsumerConfig, /, **options: Any) -> None:
        config = ConsumerConfig.of(stream_name, options)
        self._handle_signals = config.handle_signals  # here, on the main thread; the loop's thread cannot
        self.consumer = Consumer(replace(config, handle_signals=False))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kinesis-src-consumer", daemon=True)
        self._previous: Any = None

    @property
    def worker_id(self) -> str:
        return self.consumer.worker_id

    @property
    def metrics(self) -> ConsumerMetrics:
        return self.consumer.metrics

    def held_shards(self) -> list[str]:
        return self.consumer.held_shards()

    def __enter__(self) -> Self:
        self._thread.start()
        self._install_sigterm()  # first: a SIGTERM while starting still ends in a graceful close
        try:
            self._run(self.consumer.start())
        except BaseException:
            self._restore_sigterm()
            self._shutdown_loop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._run(self.consumer.close())
        finally:
            self._restore_sigterm()
            self._shutdown_loop()

    def __iter__(self) -> Iterator[BlockingBatch]:
        while True:
            try:
                batch = self._run(self.consumer.__anext__())
            except StopAsyncIteration:
                return
            yield BlockingBatch(batch, self._run)

    def process(self, handler: Callable[[DeliveredRecord], Any], *, max_in_flight: int = 64,
                **options: Any) -> ProcessingMetrics:
        """Run the sync ``handler`` on ``max_in_flight`` threads until the consumer stops;
        returns the metrics. Options and outcomes: :func:`kinesis_src.consumer.processing.process`
        (docs/processing.md). The handler never runs on the loop, so a blocking call in it
        stalls neither fetching nor leases."""
        pool = ThreadPoolExecutor(max_workers=max(1, max_in_flight) if isinstance(max_in_flight, int) else 1,
                                  thread_name_prefix="kinesis-src-handler")

        async def on_pool(record: DeliveredRecord) -> None:
            await asyncio.get_running_loop().run_in_executor(pool, handler, record)

        if not callable(handler):  # checked here: on_pool itself is always callable
            pool.shutdown(wait=False)
            return self._run(process(self.consumer, handler, max_in_flight=max_in_flight, **options))
        try:
            return self._run(process(self.consumer, on_pool, max_in_flight=max_in_flight, **options))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        self.consumer.stop()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting for the next batch
            raise

    def _shutdown_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._loop.is_running():
            self._loop.close()

    def _install_sigterm(self) -> None:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.consumer.stop()

    def _restore_sigterm(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
