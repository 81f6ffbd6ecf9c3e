"""The async consumer: leases from the lease table, fetches on aiobotocore, batches to the application.

Three parties, and what each owns
---------------------------------
* The **lease coordinator** (a thread, :class:`~kinesis_src.leases.LeaseCoordinator`)
  decides which shards this process holds: fair share among the processes
  with the same application name, failover, parent-first assignment. It
  tells the consumer through the listener methods below, from its thread;
  they hop onto the event loop.
* One **fetcher task per held shard** (:class:`~kinesis_src.retrieval.async_polling.ShardFetcher`) reads
  from the lease's checkpoint, paced within Kinesis' per-shard limits, and
  queues batches. At most ``prefetch_batches`` undelivered batches per
  shard: a slow application slows fetching instead of filling memory.
* The **application** takes batches from the shared queue (``async for``) and
  acknowledges them with ``await batch.checkpoint()``.

Each holding of a shard has one explicit state (:mod:`.shard_state`):
FETCHING -> END_SEEN -> ENDING -> ENDED, or RELEASING -> RELEASED, or LOST.
A shard is finished (SHARD_END written, children leased) only when its
fetcher saw the end *and* the batch holding its last record was
checkpointed (that batch says ``ends_shard``): children never start before
their parents are acknowledged, and a crash before that point redelivers
the parent's tail, never skips it. A SHARD_END write that fails (lease
lost, DynamoDB retries exhausted) drops that shard only; its next owner
reads the tail again and ends it (:mod:`.acks`).

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
from datetime import datetime
from typing import Any, AsyncIterator

from ..aws import DynamoDBClient, KinesisClient
from ..aws.async_kinesis import AsyncKinesisClient
from ..config import AwsSettings, CredentialSource
from ..errors import ConfigurationError, DataLossError, ShardNotFoundError
from ..leases.coordinator import LeaseCoordinator
from ..leases.model import Lease
from ..leases.shard_sync import ShardSync
from ..leases.stream_binding import bind_stream
from ..leases.table import LeaseTable
from ..leases.timing import LeaseTiming
from ..names import default_table_name, validate_name
from ..positions import Position
from ..records import RecordPage
from ..retrieval.pacing import FetchPacing
from ..retrieval.polling import MAX_RECORDS_PER_FETCH
from ..retrieval.registration import (
    ConsumerMode,
    FanOutTarget,
    deregister,
    parse_consumer_mode,
    register,
)
from ..retrieval.registration import consumer_name as consumer_name_of
from ..retry import RetryPolicy
from .acks import Acknowledger
from .batch import Batch
from .bridge import LoopListener, SigtermHandler, cancel, on_loop
from .fetching import Fetcher, FetchSettings, new_fetcher
from .metrics import ConsumerMetrics
from .options import default_worker_id, parse_initial_position
from .shard_state import EndAction, HeldShard, Holdings, ShardPhase
from .writes import WritesUnderWay

log = logging.getLogger(__name__)

_STOP = object()  # queue sentinel: wake __anext__ for a stop or a failure
END_ACK_WARNING_S = 60.0  # default of end_ack_warning_s


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
        end_ack_warning_s: float = END_ACK_WARNING_S,
        fail_on_data_loss: bool = False,
        strict_aggregation: bool = False,
        consumer_mode: str = "polling",
        consumer_name: str | None = None,
        require_consumer_deregistration: bool = False,
        handle_signals: bool = True,
        retry: RetryPolicy | None = None,
        credentials: CredentialSource | None = None,
    ) -> None:
        self.stream = validate_name(stream_name, "stream_name")
        self.application = validate_name(application_name, "application_name")
        self.initial_position = parse_initial_position(initial_position)
        if not 1 <= max_records_per_fetch <= MAX_RECORDS_PER_FETCH:
            raise ConfigurationError(f"max_records_per_fetch must be 1..{MAX_RECORDS_PER_FETCH}, got {max_records_per_fetch}")
        if prefetch_batches < 1:
            raise ConfigurationError(f"prefetch_batches must be >= 1, got {prefetch_batches}")
        if release_timeout_s < 0 or metrics_interval_s <= 0 or end_ack_warning_s <= 0:
            raise ConfigurationError("release_timeout_s must be >= 0, metrics_interval_s and end_ack_warning_s > 0")
        extra: dict[str, Any] = {"retry": retry} if retry is not None else {}
        if credentials is not None:
            extra["credentials"] = credentials
        self.settings = AwsSettings.from_env(region, endpoint_url, dynamodb_endpoint_url, **extra)
        self.table_name = lease_table_name or default_table_name(self.application)
        self.worker_id = worker_id or default_worker_id()
        self.timing = lease_timing or LeaseTiming()
        self.limit = max_records_per_fetch
        self.pacing = FetchPacing(idle_interval_s=idle_interval_s)
        self.release_timeout_s = release_timeout_s
        self.preserve_shard_order = preserve_shard_order
        self.metrics_interval_s = metrics_interval_s
        self.handle_signals = handle_signals
        self.fail_on_data_loss = fail_on_data_loss
        self.strict_aggregation = strict_aggregation
        self.consumer_mode = parse_consumer_mode(consumer_mode, "consumer_mode")
        self.consumer_name = consumer_name_of(consumer_name, self.application, "consumer_name")
        if self.consumer_mode is not ConsumerMode.EFO and (consumer_name is not None or require_consumer_deregistration):
            raise ConfigurationError(
                "consumer_name and require_consumer_deregistration apply to enhanced fan-out only: "
                "add consumer_mode='efo', or remove them"
            )
        self.require_consumer_deregistration = require_consumer_deregistration
        self.fan_out: FanOutTarget | None = None  # the registered stream consumer, once started in EFO mode
        self.check_retention = True  # report a resume whose checkpointed record was trimmed (the first page tells)
        self.metrics = ConsumerMetrics(self.worker_id)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kinesis: AsyncKinesisClient | None = None
        self._coordinator: LeaseCoordinator | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._holdings = Holdings(self.metrics, prefetch_batches)
        self._in_flight: Batch | None = None
        self._progress = asyncio.Event()  # set whenever the in-flight batch changes or is acknowledged
        self._stopping = False
        self._failure: BaseException | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._sigterm = SigtermHandler(self.worker_id)
        self.writes = WritesUnderWay(has_work=lambda: not self._queue.empty())  # see .writes
        self._acks = Acknowledger(
            self.worker_id, self.stream, self._holdings, self.metrics,
            lambda: self._coordinator, self._lost, self._progress.set, end_ack_warning_s, self.writes,
        )

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open clients, make sure the lease table exists, register, take a first share of leases."""
        self._loop = asyncio.get_running_loop()
        if self.handle_signals:  # first: a SIGTERM while starting still ends in a graceful close
            self._sigterm.install(self._loop, self.stop)
        try:
            if self.consumer_mode is ConsumerMode.EFO:
                self.fan_out = await asyncio.to_thread(register, KinesisClient(self.settings), self.stream, self.consumer_name)
        except BaseException:
            self._sigterm.remove()
            raise
        self._kinesis = await AsyncKinesisClient(
            self.settings, self._fetch_settings().max_connections, before_decode=self.writes.quiet
        ).__aenter__()
        try:
            self._coordinator = await asyncio.to_thread(self._new_coordinator)
            await asyncio.to_thread(self._coordinator.start)
        except BaseException:
            self._sigterm.remove()
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
        summary = kinesis.describe_stream(self.stream)  # a missing stream fails here, with its name
        if summary.identity is not None:  # a recreated stream fails here, before any lease is read
            bind_stream(table, summary.identity)
        return LeaseCoordinator(
            table,
            self.worker_id,
            timing=self.timing,
            preserve_shard_order=self.preserve_shard_order,
            shard_sync=ShardSync(kinesis, table, self.initial_position),
            listener=LoopListener(
                lambda: self._loop, self._acquired, self._lost, self._prepare_release, self.release_wait_s
            ),
        )

    async def close(self) -> None:
        """Stop fetching, release every lease (graceful hand-off), deregister, close clients."""
        self._stopping = True
        self._sigterm.remove()
        self._in_flight = None
        self._progress.set()
        for shard in self._holdings.all():
            _begin_release(shard)
            await cancel(shard.task)
        if self._coordinator is not None:
            await asyncio.to_thread(self._coordinator.stop)
        await cancel(self._housekeeping)
        if self._kinesis is not None:
            await self._kinesis.__aexit__(None, None, None)
        if self.fan_out is not None and self.require_consumer_deregistration:
            await asyncio.to_thread(deregister, KinesisClient(self.settings), self.fan_out)
        log.info("consumer %s stopped: %s", self.worker_id, self.metrics.summary())

    def stop(self) -> None:
        """End the iteration after the current batch; safe from any thread and from signal handlers."""
        loop = self._loop
        if loop is None:
            self._stopping = True
        elif on_loop(loop):
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
            if self._queue.empty():
                self.writes.wake()  # the application will wait for a page next: decoding must not wait for writes
            if item is _STOP:
                continue
            await self._until_trusted()
            shard = self._holdings.of(item.generation, item.shard_id)
            if shard is None or not shard.state.delivering:
                continue  # the lease moved on, or the shard ended, while the batch waited
            shard.slots.release()
            shard.state.hand_out(item.index)
            self._set_in_flight(item)
            self._count_delivery(item)
            return item

    async def _until_trusted(self) -> None:
        """A worker whose own heartbeat is overdue (paused process, DynamoDB unreachable) may already
        be declared dead, and one whose table view is stale may have been stolen from unseen: deliver
        nothing until it renews and reads the table again, or until its leases are dropped."""
        coordinator = self._coordinator
        while coordinator is not None and coordinator.failure is None and not (
            coordinator.is_live() and coordinator.view_is_fresh()
        ):
            if self._stopping:
                return
            await asyncio.sleep(0.05)

    def _set_in_flight(self, batch: Batch | None) -> None:
        self._in_flight = batch
        self._progress.set()

    def _count_delivery(self, batch: Batch) -> None:
        nbytes = batch.byte_count  # a sum over the page: once
        self.metrics.records += len(batch)
        self.metrics.bytes += nbytes
        self.metrics.batches += 1
        if self._coordinator is not None:  # the balancer weighs leases by what they deliver
            self._coordinator.report_throughput(batch.shard_id, len(batch), nbytes)
        shard = self.metrics.shards.get(batch.shard_id)
        if shard is not None:
            shard.records += len(batch)
            shard.bytes += nbytes
            shard.last_sequence_number = batch.last_sequence_number or shard.last_sequence_number

    def held_shards(self) -> list[str]:
        return self._holdings.shard_ids()

    # -- leases (on the loop; the listener hops here) -------------------------------------

    def _acquired(self, lease: Lease) -> None:
        if self._stopping:
            return  # close() releases it with the rest
        old = self._holdings.get(lease.shard_id)
        if old is not None:  # the coordinator dropped and re-took it; the old holding is over
            old.state.lose()
            self._holdings.forget(old)
        start = lease.checkpoint.resume_position()
        if start is None:
            return
        shard = self._holdings.take(lease)
        fetcher = new_fetcher(
            self._kinesis, self._fetch_settings(), self.stream, lease.shard_id, start,  # type: ignore[arg-type]
            deliver=lambda page, s=shard: self._deliver(s, page),
            on_end=lambda page, s=shard: self._fetched_to_end(s, page),
            on_expired=self._checkpoint_expired if self.check_retention else None,
            on_deaggregated=self.metrics.count_aggregates,
        )
        shard.task = asyncio.create_task(self._fetch(shard, fetcher), name=f"fetch-{lease.shard_id}")

    def _fetch_settings(self) -> FetchSettings:
        return FetchSettings(self.limit, self.pacing, self.strict_aggregation, self.fan_out)

    async def _checkpoint_expired(self, shard_id: str, checkpointed: str, oldest: str) -> None:
        """The record a holding resumes after is gone (retention): records after it may be lost."""
        self.metrics.checkpoints_expired += 1
        message = (
            f"stream {self.stream!r}, shard {shard_id}: the checkpointed record {checkpointed} is no longer "
            f"in the stream (trimmed past retention); reading resumes at the oldest record left, {oldest}. "
            "Records between the two, if there were any, expired before they were read"
        )
        if self.fail_on_data_loss:
            self._fail(DataLossError(message + " (fail_on_data_loss=True)."))
            return
        log.warning("consumer %s: %s.", self.worker_id, message)

    def _lost(self, lease: Lease, reason: str) -> None:
        shard = self._holdings.get(lease.shard_id)
        if shard is None or shard.lease.counter > lease.counter:
            return
        if shard.state.phase is ShardPhase.ENDING:
            return  # most likely the coordinator saw our own SHARD_END land; the write's outcome decides
        shard.state.lose()
        self._holdings.forget(shard)
        if not self._stopping:
            self.metrics.leases_lost += 1
            log.warning("consumer %s lost shard %s: %s", self.worker_id, lease.shard_id, reason)

    def release_wait_s(self) -> float:
        """How long a hand-off waits for the batch in hand. The coordinator's thread waits too, and
        must not miss more than one heartbeat, so never longer than one renewal interval."""
        return min(self.release_timeout_s, self.timing.renew_s)

    async def _prepare_release(self, shard_id: str) -> None:
        """Graceful hand-off: stop fetching, then let the application finish the batch it holds."""
        shard = self._holdings.get(shard_id)
        if shard is None:
            return
        _begin_release(shard)
        await cancel(shard.task)
        wait_s = self.release_wait_s()
        try:  # asyncio.timeout, not wait_for: its 3.11 race can lose a cancel (see .writes)
            async with asyncio.timeout(wait_s):
                await self._until_not_in_flight(shard)
                async with shard.lock:  # a checkpoint of this shard under way (not the batch in hand) lands first
                    pass
        except TimeoutError:
            log.warning(
                "consumer %s: releasing shard %s while batch %d is still being processed (not checkpointed "
                "within %.1fs); its records will be delivered again to the next owner",
                self.worker_id, shard_id, self._in_flight.index if self._in_flight else 0, wait_s,
            )
        if shard.state.phase is not ShardPhase.RELEASING:
            return  # its last batch was checkpointed meanwhile (ENDING, ENDED), or the lease was lost
        shard.state.released()
        self._holdings.forget(shard)
        self.metrics.leases_released += 1

    async def _until_not_in_flight(self, shard: HeldShard) -> None:
        while True:
            batch = self._in_flight
            if batch is None or batch.generation != shard.generation or shard.state.terminal:
                return
            if batch.index <= shard.state.acknowledged:
                return
            self._progress.clear()
            await self._progress.wait()

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, shard: HeldShard, fetcher: Fetcher) -> None:
        try:
            await fetcher.run()
        except asyncio.CancelledError:
            raise
        except ShardNotFoundError as exc:
            log.warning("consumer %s: %s; it is skipped until the next shard sync removes its lease", self.worker_id, exc)
        except Exception as exc:  # a fetch no retry can fix: the application must hear of it
            log.error("consumer %s: reading shard %s failed: %s", self.worker_id, shard.shard_id, exc)
            self._fail(exc)

    async def _deliver(self, shard: HeldShard, page: RecordPage) -> None:
        metrics = self.metrics.shards.get(shard.shard_id)
        if metrics is not None:
            metrics.millis_behind_latest = page.millis_behind_latest
        if not len(page):
            return
        await shard.slots.acquire()
        self._enqueue(shard, page, shard.state.produce())

    def _enqueue(self, shard: HeldShard, page: RecordPage, index: int) -> None:
        batch = Batch(self.stream, shard.shard_id, page, index, shard.generation, self._acks.checkpoint, shard.state)
        self._queue.put_nowait(batch)

    async def _fetched_to_end(self, shard: HeldShard, page: RecordPage) -> None:
        """The final page: its records (if any) are the last batch; then the end decides what ends the shard."""
        await self._deliver(shard, page)
        async with shard.lock:  # no checkpoint of this shard is half-way while the end is judged
            action = shard.state.see_end(page.child_shards, self._now())
            if action is EndAction.DELIVER_END_BATCH:
                await shard.slots.acquire()  # free: every batch of this holding was handed out
                self._enqueue(shard, page, shard.state.produced)
            elif action is EndAction.END_NOW:
                await self._acks.end_from_fetcher(shard)

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
            self._acks.watch_ends(loop.time())
            if loop.time() >= next_log:
                next_log += self.metrics_interval_s
                log.info("%s", self.metrics.summary())

    def _now(self) -> float:
        return self._loop.time() if self._loop is not None else asyncio.get_running_loop().time()

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
            self._queue.put_nowait(_STOP)


def _begin_release(shard: HeldShard) -> None:
    """Stop deliveries. close() starts every release before the coordinator's before_release asks
    again; a shard whose SHARD_END write is under way (ENDING) is left to that write."""
    if shard.state.delivering:
        shard.state.release()
