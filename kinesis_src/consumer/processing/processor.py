"""The processing loop: batches in from the consumer, records out to handlers, checkpoints back.

A puller takes batches while the buffer has room; the dispatcher starts at most ``max_in_flight``
handlers; checkpoints follow the done prefix. On loss and stop: docs/processing.md, "Guarantees"."""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from typing import Any, Awaitable, Callable

from ...errors import RecordNotProcessedError
from ..batch import Batch
from .checkpoints import CheckpointWriter, Holding, HoldingPhase
from .dead_letter import (
    DeadLetter,
    DeadLetterReason,
    DeadLetterSink,
    error_parts,
    now_utc,
)
from .delivered import DeliveredRecord
from .done_tracker import Span, Target
from .metrics import ProcessingMetrics
from .options import ProcessingOptions
from .outcomes import Reject, Release
from .scheduler import Entry, EntryState, HoldingKey, Scheduler

log = logging.getLogger(__name__)

Handler = Callable[[DeliveredRecord], Awaitable[Any] | Any]
STOP_POLL_S = 0.2  # how often a puller waiting for buffer room looks for a stop request


class RunPhase(str, enum.Enum):
    RUNNING = "running"
    DRAINING = "draining"  # the consumer stopped: nothing new starts


class Processor:
    def __init__(
        self,
        consumer: Any,
        handler: Handler,
        options: ProcessingOptions,
        sink: DeadLetterSink | None,
        metrics: ProcessingMetrics,
    ) -> None:
        self.consumer = consumer
        self.handler = handler
        self.options = options
        self.sink = sink
        self.metrics = metrics
        self.scheduler = Scheduler(options.ordering)
        self.holdings: dict[HoldingKey, Holding] = {}
        self.phase = RunPhase.RUNNING
        self._tasks: set[asyncio.Task[None]] = set()
        self.checkpoints = CheckpointWriter(options.checkpoint_interval_s, self._written, self._drop, self._fail)
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._failure: BaseException | None = None
        self._loop = asyncio.get_running_loop()

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        puller = asyncio.create_task(self._pull(), name="processing-puller")
        try:
            await self._dispatch_until(puller)
            if self._failure is None:
                await self._drain()
        finally:
            puller.cancel()
            await asyncio.gather(puller, return_exceptions=True)
            await self._cancel_all()
        if self._failure is not None:
            raise self._failure

    async def _dispatch_until(self, puller: asyncio.Task[None]) -> None:
        next_log = self._loop.time() + _metrics_interval(self.consumer)
        while self._failure is None:
            self._wake.clear()
            self._sweep()
            self._start_ready()
            if puller.done():
                if puller.exception() is not None and self._failure is None:
                    self._failure = puller.exception()
                return
            if self._loop.time() >= next_log:
                next_log = self._loop.time() + _metrics_interval(self.consumer)
                log.info("%s", self.metrics.summary())
            await self._wake.wait()

    def _start_ready(self) -> None:
        while self.phase is RunPhase.RUNNING and len(self._tasks) < self.options.max_in_flight:
            entry = self.scheduler.take()
            if entry is None:
                return
            holding = self.holdings.get(entry.holding)
            if holding is None or holding.gone or not holding.latest.delivering:
                self.scheduler.finish(entry, EntryState.DROPPED)
                self.metrics.abandoned += 1
                continue
            holding.running += 1
            task = asyncio.create_task(self._attempt(entry, holding))
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._fail(task.exception())  # type: ignore[arg-type]
        self._wake.set()

    # -- batches in -------------------------------------------------------------------------

    async def _pull(self) -> None:
        try:
            while True:
                if not await self._until_room():
                    return
                try:
                    batch = await self.consumer.__anext__()
                except StopAsyncIteration:
                    return
                self._admit(batch)
        finally:
            self._wake.set()

    async def _until_room(self) -> bool:
        """Wait for the buffer to fall below its caps; False if a stop was requested.
        Each poll wakes the dispatcher when a stopped holding waits to be swept: its records hold
        buffer room, and nothing else may wake it soon (a parked record's timer can be far off)."""
        while not self._has_room():
            if _stop_requested(self.consumer):
                return False
            if self._unswept():
                self._wake.set()
            self._room.clear()
            try:
                async with asyncio.timeout(STOP_POLL_S):
                    await self._room.wait()
            except TimeoutError:
                pass
        return True

    def _unswept(self) -> bool:
        """True if a holding stopped delivering (lease lost or released, shard ended) and was not swept yet."""
        return any(h.phase is HoldingPhase.ACTIVE and not h.latest.delivering for h in self.holdings.values())

    def _has_room(self) -> bool:
        m, o = self.metrics, self.options
        return m.buffered_records < o.max_buffered_records and m.buffered_bytes < o.max_buffered_bytes

    def _admit(self, batch: Batch) -> None:
        key: HoldingKey = (batch.stream, batch.shard_id, batch.generation)
        holding = self.holdings.get(key)
        if holding is None:
            base = max(batch.owner_switches_since_checkpoint - 1, 0)
            holding = self.holdings[key] = Holding(key, base, batch)
        holding.latest = batch
        records = batch.records
        span = holding.tracker.add(batch, len(records), batch.byte_count)
        self._buffer(span.count, span.nbytes)
        for row, record in enumerate(records):
            self.scheduler.admit(Entry(key, span.start + row, record, holding.base_count))
        if not records:  # the empty batch that ends a shard: checkpointable as soon as all before it is done
            self.checkpoints.want(holding)
        self._wake.set()

    def _buffer(self, records: int, nbytes: int) -> None:
        self.metrics.buffered_records += records
        self.metrics.buffered_bytes += nbytes
        if records < 0 and self._has_room():
            self._room.set()

    # -- one delivery -----------------------------------------------------------------------

    async def _attempt(self, entry: Entry, holding: Holding) -> None:
        entry.attempts += 1
        count = entry.base_count + entry.attempts
        self.metrics.in_flight += 1
        try:
            if entry.attempts == 1 and count > self.options.max_delivery_attempts and holding.tracker.is_head(entry.ordinal):
                await self._dead_letter(entry, holding, count, DeadLetterReason.OWNER_SWITCHES, None)
                return
            await self._deliver(entry, holding, count)
        finally:
            self.metrics.in_flight -= 1
            holding.running -= 1
            if entry.state is EntryState.RUNNING:  # cancelled, or its holding went away
                self.scheduler.finish(entry, EntryState.DROPPED)
                self.metrics.abandoned += 1

    async def _deliver(self, entry: Entry, holding: Holding, count: int) -> None:
        self.metrics.deliveries += 1
        if count > 1:
            self.metrics.redelivered += 1
        try:
            result = self.handler(DeliveredRecord(entry.record, count))
            if inspect.isawaitable(result):
                await result
        except Release as release:
            self.metrics.released += 1
            await self._not_done(entry, holding, count, release, DeadLetterReason.RELEASED, release.delay_s)
        except Reject as reject:
            self.metrics.rejected += 1
            await self._dead_letter(entry, holding, count, DeadLetterReason.REJECTED, reject)
        except Exception as error:  # noqa: BLE001 - any other exception is the record's failure
            self.metrics.failed += 1
            delay = self.options.retry_backoff.delay_s(entry.attempts)
            await self._not_done(entry, holding, count, error, DeadLetterReason.FAILED, delay)
        else:
            self.metrics.accepted += 1
            self._done(entry, holding)

    async def _not_done(self, entry: Entry, holding: Holding, count: int, error: BaseException,
                        reason: DeadLetterReason, delay_s: float) -> None:
        entry.last_error = error
        if count >= self.options.max_delivery_attempts:
            await self._dead_letter(entry, holding, count, reason, error)
        elif not holding.gone and holding.latest.delivering and self.phase is RunPhase.RUNNING:
            self.scheduler.park(entry)
            self._loop.call_later(delay_s, self._retry, entry)

    def _retry(self, entry: Entry) -> None:
        if self.scheduler.wake(entry):
            self._wake.set()

    async def _dead_letter(self, entry: Entry, holding: Holding, count: int, reason: DeadLetterReason,
                           error: BaseException | None) -> None:
        if holding.gone:
            return  # the next owner delivers it again, and decides
        if self.sink is None:
            raise RecordNotProcessedError(
                f"record {entry.record.sequence_number}/{entry.record.sub_sequence_number} of stream "
                f"{entry.record.stream!r}, shard {entry.record.shard_id} was {reason.value} at delivery "
                f"{count} (max_delivery_attempts={self.options.max_delivery_attempts}) and process() has no "
                "dead_letter: pass dead_letter='<stream>' or a callable to keep going past such records; "
                "it was not checkpointed"
            ) from error
        error_type, message = error_parts(error, _reason_text(reason, count))
        letter = DeadLetter(
            entry.record, count, reason, error_type, message,
            _application(self.consumer), str(getattr(self.consumer, "worker_id", "")), now_utc(),
        )
        await self.sink.send(letter)
        self.metrics.dead_lettered += 1
        self._done(entry, holding)

    def _done(self, entry: Entry, holding: Holding) -> None:
        if holding.gone:
            return  # the finally of _attempt abandons it
        self.scheduler.finish(entry)
        if holding.tracker.complete(entry.ordinal):
            self._let_go(holding)
            self.checkpoints.want(holding)

    # -- checkpoints --------------------------------------------------------------------------

    def _written(self, holding: Holding, target: Target[Batch]) -> None:
        self.metrics.checkpoints += 1
        self._let_go(holding)
        if target.whole and target.span.batch.ends_shard:
            self._forget(holding)  # SHARD_END is written: the holding is over
        else:
            self.checkpoints.want(holding)
        self._wake.set()

    def _let_go(self, holding: Holding) -> None:
        gone: list[Span[Batch]] = holding.tracker.let_go()
        if gone:
            self._buffer(-sum(s.count for s in gone), -sum(s.nbytes for s in gone))

    # -- holdings that end ------------------------------------------------------------------------

    def _sweep(self) -> None:
        """A holding that stopped delivering (lease released or lost, shard ended) drops what has not
        started; once nothing of it runs or is being written, a last checkpoint, then it is forgotten."""
        for holding in list(self.holdings.values()):
            if holding.gone or holding.latest.delivering:
                continue
            if holding.phase is HoldingPhase.ACTIVE:  # once: no new records come to a holding that stopped
                holding.phase = HoldingPhase.CLOSING
                self.metrics.abandoned += len(self.scheduler.drop(holding.key))
            if holding.running == 0 and not holding.writing:
                if holding.tracker.target() is not None:
                    self.checkpoints.want(holding, now=True)
                else:
                    self._forget(holding)

    def _drop(self, holding: Holding) -> None:
        """The lease is gone: nothing of this holding counts any more; its records go to the next owner."""
        self.metrics.abandoned += len(self.scheduler.drop(holding.key))
        self._forget(holding)

    def _forget(self, holding: Holding) -> None:
        if holding.gone:
            return
        holding.phase = HoldingPhase.GONE
        holding.cancel_timer()
        spans = holding.tracker.spans
        self._buffer(-sum(s.count for s in spans), -sum(s.nbytes for s in spans))
        self.holdings.pop(holding.key, None)

    # -- stopping ------------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """The consumer stopped: start nothing new, give running records ``drain_timeout_s``, then
        checkpoint the done prefix of every holding; everything else is redelivered later."""
        self.phase = RunPhase.DRAINING
        self.checkpoints.at_once = True
        for holding in list(self.holdings.values()):
            self.metrics.abandoned += len(self.scheduler.drop(holding.key))
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.options.drain_timeout_s)
        await self._cancel(self._tasks)
        while self._failure is None:
            for holding in list(self.holdings.values()):
                self.checkpoints.want(holding, now=True)
            if not await self.checkpoints.settle():
                break
        log.info("processing stopped: %s", self.metrics.summary())

    async def _cancel_all(self) -> None:
        await self._cancel(self._tasks)
        await self._cancel(self.checkpoints.writes)
        for holding in self.holdings.values():
            holding.cancel_timer()

    @staticmethod
    async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self._wake.set()


def _stop_requested(consumer: Any) -> bool:
    """Whether a stop (SIGTERM, ``consumer.stop()``) was asked: ``stopping``, or ``_stopping``."""
    return bool(getattr(consumer, "stopping", False) or getattr(consumer, "_stopping", False))


def _metrics_interval(consumer: Any) -> float:
    return float(getattr(consumer, "metrics_interval_s", 60.0))


def _application(consumer: Any) -> str:
    return str(getattr(consumer, "application", ""))


def _reason_text(reason: DeadLetterReason, count: int) -> str:
    if reason is DeadLetterReason.OWNER_SWITCHES:
        return (f"delivered {count - 1} times by earlier holders of the lease without an outcome "
                "(they stopped or crashed while it was in flight)")
    return f"{reason.value} at delivery {count}"
