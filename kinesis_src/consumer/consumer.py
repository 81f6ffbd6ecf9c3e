"""The async consumer: leases from the lease table, fetches on aiobotocore, batches to the application.

Three parties, and what each owns
---------------------------------
* The **lease coordinator** (a thread, :class:`~kinesis_src.leases.LeaseCoordinator`)
  decides which shards this process holds: fair share among the processes
  with the same application name, failover, parent-first assignment. It
  tells the consumer through the listener methods below, from its thread;
  they hop onto the event loop.
* One **fetcher task per held shard** (:class:`.fetcher.ShardFetcher`) reads
  from the lease's checkpoint, paced within Kinesis' per-shard limits, and
  queues batches. At most ``prefetch_batches`` undelivered batches per
  shard: a slow application slows fetching instead of filling memory.
* The **application** takes batches from the shared queue (``async for``) and
  acknowledges them with ``await batch.checkpoint()``.

A shard is finished (SHARD_END written, children leased) only when its
fetcher saw the end *and* every batch delivered from it was checkpointed:
children never start before their parents are acknowledged, and a crash
before that point redelivers the parent's tail, never skips it.

Graceful hand-off (shedding to a new worker, SIGTERM, leaving the ``async
with``): the shard's fetcher stops, its undelivered batches are dropped, and
the release waits (up to ``release_timeout_s``, capped at one lease renewal
interval because the coordinator's heartbeat waits with it) for the batch
the application is processing to be checkpointed or passed over; then the lease
is released and the next owner starts right after the last checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, AsyncIterator

from ..aws import DynamoDBClient, KinesisClient
from ..aws.async_kinesis import AsyncKinesisClient
from ..config import AwsSettings
from ..errors import (
    ConfigurationError,
    KinesisSourceError,
    LeaseLostError,
    ShardNotFoundError,
)
from ..leases.coordinator import LeaseCoordinator, LeaseTiming
from ..leases.model import Checkpoint, Lease
from ..leases.shard_sync import ShardSync
from ..leases.table import LeaseTable
from ..names import default_table_name, validate_name
from ..positions import Position, PositionKind
from ..reader import MAX_RECORDS_PER_FETCH
from ..records import ChildShard, RecordPage
from ..retry import RetryPolicy
from .batch import Batch
from .fetcher import ShardFetcher
from .metrics import ConsumerMetrics, ShardMetrics
from .pacing import FetchPacing

log = logging.getLogger(__name__)

_STOP = object()  # queue sentinel: wake __anext__ for a stop or a failure


@dataclass(eq=False)
class _Shard:
    """A held shard as the event loop sees it. ``generation`` tells two holdings of one shard apart."""

    lease: Lease
    generation: int
    slots: asyncio.Semaphore
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None
    produced: int = 0  # batches made, numbered from 1
    acknowledged: int = 0  # highest batch number checkpointed
    end_children: tuple[ChildShard, ...] | None = None  # set when the fetcher saw SHARD_END
    releasing: bool = False  # no more deliveries; checkpoints still accepted


def parse_initial_position(value: str | datetime | Position) -> Position:
    """``"trim_horizon"``/``"earliest"``, ``"latest"``, a datetime / ISO-8601 text (AT_TIMESTAMP), or a Position."""
    if isinstance(value, Position):
        position = value
    elif isinstance(value, datetime):
        position = Position.at_timestamp(value)
    elif isinstance(value, str) and value.strip().lower() in ("trim_horizon", "earliest", "latest"):
        position = Position.parse(value)
    elif isinstance(value, str):
        try:
            position = Position.at_timestamp(value)
        except (ValueError, KinesisSourceError) as exc:
            raise ConfigurationError(
                f"initial_position {value!r} is not valid: use 'trim_horizon', 'latest', or an ISO-8601 "
                "timestamp / datetime (AT_TIMESTAMP)"
            ) from exc
    else:
        raise ConfigurationError(f"initial_position must be a string, datetime or Position, got {type(value).__name__}")
    if position.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER):
        raise ConfigurationError("initial_position is where a new application starts: trim_horizon, latest or a timestamp")
    return position


def default_worker_id() -> str:
    """Unique per process, readable in the lease table: host, pid, and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Consumer:
    """Consume a Kinesis stream with other processes of the same application; see the module docstring.

    ::

        async with Consumer("orders", application_name="billing-etl") as consumer:
            async for batch in consumer:
                handle(batch.records)
                await batch.checkpoint()

    Delivery is at-least-once: after a crash or a lost lease, everything
    after the shard's last checkpoint is delivered again (to whichever
    worker holds the lease next).
    """

    def __init__(
        self,
        stream_name: str,
        *,
        application_name: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        dynamodb_endpoint_url: str | None = None,
        initial_position: str | datetime | Position = "trim_horizon",
        worker_id: str | None = None,
        lease_table_name: str | None = None,
        lease_timing: LeaseTiming | None = None,
        max_records_per_fetch: int = MAX_RECORDS_PER_FETCH,
        idle_interval_s: float = 1.0,
        prefetch_batches: int = 1,
        release_timeout_s: float = 10.0,
        preserve_shard_order: bool = True,
        metrics_interval_s: float = 60.0,
        handle_signals: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.stream = validate_name(stream_name, "stream_name")
        self.application = validate_name(application_name, "application_name")
        self.initial_position = parse_initial_position(initial_position)
        if not 1 <= max_records_per_fetch <= MAX_RECORDS_PER_FETCH:
            raise ConfigurationError(f"max_records_per_fetch must be 1..{MAX_RECORDS_PER_FETCH}, got {max_records_per_fetch}")
        if prefetch_batches < 1:
            raise ConfigurationError(f"prefetch_batches must be >= 1, got {prefetch_batches}")
        if release_timeout_s < 0 or metrics_interval_s <= 0:
            raise ConfigurationError("release_timeout_s must be >= 0 and metrics_interval_s > 0")
        extra: dict[str, Any] = {"retry": retry} if retry is not None else {}
        self.settings = AwsSettings.from_env(region, endpoint_url, dynamodb_endpoint_url, **extra)
        self.table_name = lease_table_name or default_table_name(self.application)
        self.worker_id = worker_id or default_worker_id()
        self.timing = lease_timing or LeaseTiming()
        self.limit = max_records_per_fetch
        self.pacing = FetchPacing(idle_interval_s=idle_interval_s)
        self.prefetch = prefetch_batches
        self.release_timeout_s = release_timeout_s
        self.preserve_shard_order = preserve_shard_order
        self.metrics_interval_s = metrics_interval_s
        self.handle_signals = handle_signals
        self.metrics = ConsumerMetrics(self.worker_id)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kinesis: AsyncKinesisClient | None = None
        self._coordinator: LeaseCoordinator | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._shards: dict[str, _Shard] = {}
        self._generation = 0
        self._in_flight: Batch | None = None
        self._progress = asyncio.Event()  # set whenever the in-flight batch changes or is acknowledged
        self._stopping = False
        self._failure: BaseException | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._signals: list[signal.Signals] = []

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open clients, make sure the lease table exists, register, take a first share of leases."""
        self._loop = asyncio.get_running_loop()
        self._install_signal_handlers()  # first: a SIGTERM while starting still ends in a graceful close
        self._kinesis = await AsyncKinesisClient(self.settings).__aenter__()
        try:
            self._coordinator = await asyncio.to_thread(self._new_coordinator)
            await asyncio.to_thread(self._coordinator.start)
        except BaseException:
            self._remove_signal_handlers()
            await self._kinesis.__aexit__(None, None, None)
            raise
        self._housekeeping = asyncio.create_task(self._housekeep(), name=f"consumer-{self.worker_id}")
        log.info(
            "consumer %s started on stream %r (application %r, lease table %r)",
            self.worker_id, self.stream, self.application, self.table_name,
        )

    def _new_coordinator(self) -> LeaseCoordinator:
        table = LeaseTable(DynamoDBClient(self.settings), self.table_name, self.application, self.stream)
        table.ensure_table(create=True)
        kinesis = KinesisClient(self.settings)
        kinesis.describe_stream(self.stream)  # a missing stream fails here, with its name
        return LeaseCoordinator(
            table,
            self.worker_id,
            timing=self.timing,
            preserve_shard_order=self.preserve_shard_order,
            shard_sync=ShardSync(kinesis, table, self.initial_position),
            listener=_LoopListener(self),
        )

    async def close(self) -> None:
        """Stop fetching, release every lease (graceful hand-off), deregister, close clients."""
        self._stopping = True
        self._remove_signal_handlers()
        self._in_flight = None
        self._progress.set()
        for shard in list(self._shards.values()):
            shard.releasing = True
            await _cancel(shard.task)
        if self._coordinator is not None:
            await asyncio.to_thread(self._coordinator.stop)
        await _cancel(self._housekeeping)
        if self._kinesis is not None:
            await self._kinesis.__aexit__(None, None, None)
        log.info("consumer %s stopped: %s", self.worker_id, self.metrics.summary())

    def stop(self) -> None:
        """End the iteration after the current batch; safe from any thread and from signal handlers."""
        loop = self._loop
        if loop is None:
            self._stopping = True
        elif _on_loop(loop):
            self._request_stop()
        else:
            loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        if not self._stopping:
            log.info("consumer %s stopping: finishing the current batch, then releasing leases", self.worker_id)
        self._stopping = True
        self._queue.put_nowait(_STOP)

    # -- iteration ---------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self

    async def __anext__(self) -> Batch:
        self._set_in_flight(None)
        while True:
            if self._failure is not None:
                raise self._failure
            if self._stopping:
                raise StopAsyncIteration
            item = await self._queue.get()
            if item is _STOP:
                continue
            await self._until_trusted()
            shard = self._shards.get(item.shard_id)
            if shard is None or shard.generation != item.generation or shard.releasing:
                continue  # the lease moved on while the batch waited
            shard.slots.release()
            self._set_in_flight(item)
            self._count_delivery(item)
            return item

    async def _until_trusted(self) -> None:
        """A worker whose own heartbeat is overdue (paused process, DynamoDB unreachable) may already
        be declared dead: deliver nothing until it renews, or until its leases are dropped."""
        coordinator = self._coordinator
        while coordinator is not None and not coordinator.is_live() and coordinator.failure is None:
            if self._stopping:
                return
            await asyncio.sleep(0.05)

    def _set_in_flight(self, batch: Batch | None) -> None:
        self._in_flight = batch
        self._progress.set()

    def _count_delivery(self, batch: Batch) -> None:
        self.metrics.records += len(batch)
        self.metrics.bytes += batch.byte_count
        self.metrics.batches += 1
        shard = self.metrics.shards.get(batch.shard_id)
        if shard is not None:
            shard.records += len(batch)
            shard.bytes += batch.byte_count
            shard.last_sequence_number = batch.last_sequence_number

    def held_shards(self) -> list[str]:
        return sorted(self._shards)

    # -- leases (on the loop; the listener hops here) -------------------------------------

    def _acquired(self, lease: Lease) -> None:
        if self._stopping:
            return  # close() releases it with the rest
        old = self._shards.pop(lease.shard_id, None)
        if old is not None and old.task is not None:
            old.task.cancel()
        start = lease.checkpoint.resume_position()
        if start is None:
            return
        self._generation += 1
        shard = _Shard(lease, self._generation, asyncio.Semaphore(self.prefetch))
        self._shards[lease.shard_id] = shard
        self.metrics.leases_taken += 1
        self.metrics.shards[lease.shard_id] = ShardMetrics(lease.shard_id, checkpoint=str(lease.checkpoint))
        fetcher = ShardFetcher(
            self._kinesis, self.stream, lease.shard_id, start,  # type: ignore[arg-type]
            limit=self.limit, pacing=self.pacing,
            deliver=lambda page, s=shard: self._deliver(s, page),
            on_end=lambda children, s=shard: self._fetched_to_end(s, children),
        )
        shard.task = asyncio.create_task(self._fetch(shard, fetcher), name=f"fetch-{lease.shard_id}")

    def _lost(self, lease: Lease, reason: str) -> None:
        shard = self._shards.get(lease.shard_id)
        if shard is None or shard.lease.counter > lease.counter:
            return
        self._forget(shard)
        if not self._stopping:
            self.metrics.leases_lost += 1
            log.warning("consumer %s lost shard %s: %s", self.worker_id, lease.shard_id, reason)

    def release_wait_s(self) -> float:
        """How long a hand-off waits for the batch in hand. The coordinator's thread waits too, and
        must not miss more than one heartbeat, so never longer than one renewal interval."""
        return min(self.release_timeout_s, self.timing.renew_s)

    async def _prepare_release(self, shard_id: str) -> None:
        """Graceful hand-off: stop fetching, then let the application finish the batch it holds."""
        shard = self._shards.get(shard_id)
        if shard is None:
            return
        shard.releasing = True
        await _cancel(shard.task)
        wait_s = self.release_wait_s()
        try:
            await asyncio.wait_for(self._until_not_in_flight(shard), wait_s)
        except asyncio.TimeoutError:
            log.warning(
                "consumer %s: releasing shard %s while batch %d is still being processed (not checkpointed "
                "within %.1fs); its records will be delivered again to the next owner",
                self.worker_id, shard_id, self._in_flight.index if self._in_flight else 0, wait_s,
            )
        self._forget(shard)
        self.metrics.leases_released += 1

    async def _until_not_in_flight(self, shard: _Shard) -> None:
        while True:
            batch = self._in_flight
            if batch is None or batch.generation != shard.generation or batch.index <= shard.acknowledged:
                return
            self._progress.clear()
            await self._progress.wait()

    def _forget(self, shard: _Shard) -> None:
        if self._shards.get(shard.lease.shard_id) is shard:
            del self._shards[shard.lease.shard_id]
            self.metrics.shards.pop(shard.lease.shard_id, None)
        if shard.task is not None and shard.task is not asyncio.current_task():
            shard.task.cancel()

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, shard: _Shard, fetcher: ShardFetcher) -> None:
        try:
            await fetcher.run()
        except asyncio.CancelledError:
            raise
        except ShardNotFoundError as exc:
            log.warning("consumer %s: %s; it is skipped until the next shard sync removes its lease", self.worker_id, exc)
        except Exception as exc:  # a fetch no retry can fix: the application must hear of it
            log.error("consumer %s: reading shard %s failed: %s", self.worker_id, shard.lease.shard_id, exc)
            self._fail(exc)

    async def _deliver(self, shard: _Shard, page: RecordPage) -> None:
        metrics = self.metrics.shards.get(shard.lease.shard_id)
        if metrics is not None:
            metrics.millis_behind_latest = page.millis_behind_latest
        if not len(page):
            return
        await shard.slots.acquire()
        shard.produced += 1
        batch = Batch(
            self.stream, shard.lease.shard_id, page, shard.produced, shard.generation, self._checkpoint
        )
        self._queue.put_nowait(batch)

    async def _fetched_to_end(self, shard: _Shard, children: tuple[ChildShard, ...]) -> None:
        shard.end_children = children
        async with shard.lock:
            if shard.acknowledged == shard.produced:
                await self._end_shard(shard)

    # -- acknowledgement ------------------------------------------------------------------

    async def _checkpoint(self, batch: Batch) -> None:
        shard = self._current(batch)
        async with shard.lock:
            shard = self._current(batch)
            if batch.index <= shard.acknowledged:
                return
            last = shard.end_children is not None and batch.index == shard.produced
            if last:
                await self._end_shard(shard)
            else:
                await self._write_checkpoint(shard, Checkpoint.sequence(batch.last_sequence_number))
            shard.acknowledged = batch.index
            self._progress.set()

    def _current(self, batch: Batch) -> _Shard:
        shard = self._shards.get(batch.shard_id)
        if shard is None or shard.generation != batch.generation:
            raise LeaseLostError(
                f"worker {self.worker_id} no longer holds the lease on shard {batch.shard_id} of stream "
                f"{self.stream!r} (taken over, or released); nothing was written. Its new owner delivers "
                "the records after the last checkpoint again.",
                batch.shard_id,
            )
        return shard

    async def _write_checkpoint(self, shard: _Shard, checkpoint: Checkpoint) -> None:
        try:
            lease = await asyncio.to_thread(self._coordinator.checkpoint, shard.lease.shard_id, checkpoint)  # type: ignore[union-attr]
        except LeaseLostError:
            self._lost(shard.lease, "checkpoint rejected: lease taken over")
            raise
        shard.lease = lease
        self.metrics.checkpoints += 1
        metrics = self.metrics.shards.get(lease.shard_id)
        if metrics is not None:
            metrics.checkpoint = str(checkpoint)

    async def _end_shard(self, shard: _Shard) -> None:
        """Every record of the closed shard is acknowledged: SHARD_END, and its children become leasable."""
        children = shard.end_children or ()
        try:
            await asyncio.to_thread(self._coordinator.shard_ended, shard.lease.shard_id, children)  # type: ignore[union-attr]
        except LeaseLostError:
            self._lost(shard.lease, "SHARD_END rejected: lease taken over")
            raise
        self.metrics.checkpoints += 1
        self.metrics.shards_ended += 1
        self._forget(shard)

    # -- housekeeping -----------------------------------------------------------------------

    async def _housekeep(self) -> None:
        """Watch the coordinator for a fatal failure; log metrics every ``metrics_interval_s``."""
        loop = asyncio.get_running_loop()
        next_log = loop.time() + self.metrics_interval_s
        while True:
            await asyncio.sleep(min(0.5, self.metrics_interval_s))
            failure = self._coordinator.failure if self._coordinator else None
            if failure is not None and self._failure is None:
                self._fail(failure)
            if loop.time() >= next_log:
                next_log += self.metrics_interval_s
                log.info("%s", self.metrics.summary())

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
            self._queue.put_nowait(_STOP)

    # -- signals ------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> None:
        """SIGTERM -> :meth:`stop`, unless the application installed its own SIGTERM handler."""
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            log.info("consumer %s: SIGTERM already has a handler; call consumer.stop() from it", self.worker_id)
            return
        try:
            self._loop.add_signal_handler(signal.SIGTERM, self.stop)  # type: ignore[union-attr]
        except (NotImplementedError, RuntimeError):  # Windows, or a loop without signal support
            return
        self._signals.append(signal.SIGTERM)

    def _remove_signal_handlers(self) -> None:
        """Back to the default action, which is what was there before (see above)."""
        while self._signals:
            self._loop.remove_signal_handler(self._signals.pop())  # type: ignore[union-attr]


class _LoopListener:
    """The coordinator's listener: its calls come from the coordinator's thread and run on the loop."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_acquired(self, lease: Lease) -> None:
        self._post(self.consumer._acquired, lease)

    def on_lost(self, lease: Lease, reason: str) -> None:
        self._post(self.consumer._lost, lease, reason)

    def before_release(self, lease: Lease) -> None:
        loop = self.consumer._loop
        if loop is None or loop.is_closed() or _on_loop(loop):
            return
        future = asyncio.run_coroutine_threadsafe(self.consumer._prepare_release(lease.shard_id), loop)
        future.result(self.consumer.release_wait_s() + 5.0)

    def _post(self, fn: Any, *args: Any) -> None:
        loop = self.consumer._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _cancel(task: asyncio.Task[Any] | None) -> None:
    if task is None or task.done() or task is asyncio.current_task():
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
