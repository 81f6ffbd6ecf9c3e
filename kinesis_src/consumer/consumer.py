"""The async consumer: leases, one fetch task per held shard, batches to the application.

Everything runs on one event loop (docs/architecture.md); a fetcher queues at most
``prefetch_batches`` batches, so a slow application slows fetching. Guarantees: docs/consumer.md."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Self

from ..aws.async_dynamodb import open_async_dynamodb
from ..aws.async_kinesis import AsyncKinesisClient
from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..aws.dynamodb import DynamoDBClient
from ..errors import ConfigurationError
from ..retrieval.registration import ConsumerMode, FanOutTarget
from .batch import Batch
from .consumer_config import ConsumerConfig
from .delivery import deliverable
from .fetching import FAN_OUT_CONNECTIONS, POLLING_CONNECTIONS
from .handout import WAKE, Handout
from .key_range_guard import KeyRangeGuard
from .metrics import ConsumerMetrics, StreamMetrics
from .signals import SigtermHandler, cancel, on_loop
from .stream_reader import StreamReader
from .unit_readers import UnitReaders

if TYPE_CHECKING:
    from .processing import ProcessingMetrics

log = logging.getLogger(__name__)

# the options, and retired option names: set on a built consumer, each is refused
_OPTIONS = frozenset(f.name for f in fields(ConsumerConfig)) | {"timing", "limit", "streams"}



class Consumer:
    """Consume Kinesis streams with other processes of the same application (docs/consumer.md).

    ::

        async with Consumer("orders", application_name="billing-etl") as consumer:
            async for batch in consumer:
                handle(batch.records)
                await batch.checkpoint()

    ``stream_name`` is a stream or a list of them; ``key_range`` makes the worker sticky.
    Delivery is at least once: after a crash or a lost lease, a shard's records after its last
    checkpoint are delivered again."""

    __slots__ = ("_guard", "_housekeeping", "_owns_kinesis", "_sigterm", "config", "handout", "metrics", "stream_metrics",
                 "units")

    def __init__(
        self, stream_name: str | Sequence[str] | ConsumerConfig, /, *, kinesis: AsyncKinesisClient | None = None,
        **options: Any,
    ) -> None:
        """``Consumer(config)``, or ``Consumer(stream_name, application_name=..., **options)``: the
        options are :class:`~.consumer_config.ConsumerConfig`'s fields, checked there. ``kinesis``:
        an open async Kinesis client to fetch with instead of one of its own (the caller closes it)."""
        self.config = config = ConsumerConfig.of(stream_name, options)
        self.metrics = ConsumerMetrics(self.worker_id)
        self.handout = Handout(kinesis)
        self._owns_kinesis = kinesis is None
        self._housekeeping: asyncio.Task[None] | None = None
        self._sigterm = SigtermHandler(self.worker_id)
        several = len(config.streams) > 1
        self.stream_metrics = {s: StreamMetrics(self.metrics, s, several) for s in config.streams}
        self.units = UnitReaders(config, self.handout, self.stream_metrics)
        self._guard = KeyRangeGuard(config, self.handout.fail, lambda: self.handout.dynamodb)

    def __setattr__(self, name: str, value: object) -> None:
        """An option set on a built consumer would be ignored: refuse it, naming where it goes."""
        if name in _OPTIONS:
            raise ConfigurationError(
                f"{name} is an option: pass it when the consumer is built (Consumer(..., {name}=...), or a "
                "ConsumerConfig); consumer.config holds the options in use"
            )
        super().__setattr__(name, value)

    @property
    def worker_id(self) -> str:
        return self.config.worker_id  # type: ignore[return-value]  # filled in by the config

    @property
    def stream(self) -> str:
        """The stream, or the streams joined by commas (for log lines)."""
        return ",".join(self.config.streams)

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open clients, check every stream, claim the key range, register EFO consumers,
        start the leases. A missing or recreated stream, a bad table or an overlapping key range
        fails here."""
        config, handout = self.config, self.handout
        handout.loop = asyncio.get_running_loop()
        if config.handle_signals:  # first: a SIGTERM while starting still ends in a graceful close
            self._sigterm.install(handout.loop, self.stop)
        if self._owns_kinesis:
            connections = FAN_OUT_CONNECTIONS if config.consumer_mode is ConsumerMode.EFO else POLLING_CONNECTIONS
            client = AsyncKinesisClient(config.settings, connections)
            handout.kinesis = await client.__aenter__()
        try:
            handout.dynamodb = await open_async_dynamodb(config.settings)
            await self.units.prepare(self._guard)
            for key, reader in list(self.readers.items()):  # one at a time: each unit's heartbeat, then its start
                if not await self.units.start_reader(reader):
                    del self.readers[key]  # claimed meanwhile
        except BaseException:
            await self._abort_start()
            raise
        self._housekeeping = asyncio.create_task(self._housekeep(), name=f"consumer-{self.worker_id}")
        log.info(
            "consumer %s started on stream(s) %s (application %r, lease table %r%s)",
            self.worker_id, ", ".join(map(repr, config.streams)), config.application_name, config.lease_table_name,
            "" if config.key_range is None else f", key range {config.key_range}",
        )

    async def _abort_start(self) -> None:
        """Undo a start that failed or was cancelled: stop what it started, release what it claimed."""
        self.handout.stopping = True
        self._sigterm.remove()
        if self.handout.dynamodb is None:  # its opening failed: what the start wrote is undone without it
            self.handout.dynamodb = BotocoreDynamoDB(DynamoDBClient(self.config.settings))
        await self.units.drain()
        for reader in self.readers.values():
            await reader.stop_fetching()
        for reader in self.readers.values():
            if reader.coordinator is not None:  # started, starting, or only registered: its heartbeat goes
                await reader.coordinator.astop()
        await self._guard.release()
        if self.handout.kinesis is not None:
            await self.units.deregister_fan_outs()  # failures are logged; the start's is raised
        await self._close_clients()

    async def close(self) -> None:
        """Stop fetching, release every lease (graceful hand-off), deregister, close clients."""
        self.handout.stopping = True
        self._sigterm.remove()
        self.handout.set_in_flight(None)
        await cancel(self._housekeeping)
        await self.units.drain()  # a reader's start or stop under way ends first
        readers = list(self.readers.values())
        for reader in readers:
            await reader.stop_fetching()
        for reader in readers:
            if reader.coordinator is not None:
                await reader.coordinator.astop()
        await self._guard.release()
        failures = await self.units.deregister_fan_outs()
        await self._close_clients()
        log.info("consumer %s stopped: %s", self.worker_id, self.metrics.summary())
        if failures:
            raise failures[0]

    async def _close_clients(self) -> None:
        """The async clients, once nothing writes or fetches: the Kinesis one only if it opened it."""
        dynamodb, self.handout.dynamodb = self.handout.dynamodb, None
        if dynamodb is not None:
            await dynamodb.__aexit__(None, None, None)
        if self._owns_kinesis and self.handout.kinesis is not None:
            await self.handout.kinesis.__aexit__(None, None, None)

    async def process(self, handler: Callable[[Any], Awaitable[Any]], **options: Any) -> ProcessingMetrics:
        """Process records many at a time, each acknowledged on its own, instead of ``async for``.
        Options, outcomes and guarantees: :func:`kinesis_src.consumer.processing.process` and
        docs/processing.md. Call it inside ``async with``."""
        from .processing import process

        return await process(self, handler, **options)

    def stop(self) -> None:
        """End the iteration after the current batch; safe from any thread and from signal handlers."""
        loop = self.handout.loop
        if loop is None:
            self.handout.stopping = True
        elif on_loop(loop):
            self._request_stop()
        else:
            loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        if self.handout.request_stop():
            log.info("consumer %s stopping: finishing the current batch, then releasing leases", self.worker_id)

    # -- iteration ---------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self

    async def __anext__(self) -> Batch:
        handout = self.handout
        handout.set_in_flight(None)
        while True:
            if handout.failure is not None:
                raise handout.failure
            if handout.stopping:
                raise StopAsyncIteration
            item = await handout.queue.get()
            if item is WAKE or (found := await deliverable(handout, self.units, item)) is None:
                continue  # a wake-up; or the lease moved on, the shard ended, or its unit was handed over
            reader, shard = found
            shard.slots.release()
            shard.state.hand_out(item.index)
            handout.set_in_flight(item)
            reader.count_delivery(item)
            return item

    @property
    def failure(self) -> BaseException | None:
        """What ends the iteration with an error (raised by ``__anext__``), once something failed."""
        return self.handout.failure

    @property
    def stopping(self) -> bool:
        """True once ``stop()`` or ``close()`` began."""
        return self.handout.stopping

    @property
    def readers(self) -> dict[str, StreamReader]:
        """One reader per (stream, unit) read now: :mod:`.unit_readers`."""
        return self.units.readers

    @property
    def fan_out(self) -> FanOutTarget | None:
        """The EFO stream consumer of the first reader; each reader (stream and unit) has its own: ``readers[key].fan_out``."""
        return next((r.fan_out for r in self.readers.values() if r.fan_out is not None), None)

    def held_shards(self) -> list[str]:
        """Shard ids held now; with several streams, ``"<stream>/<shard id>"``."""
        return self.units.held_shards()

    # -- housekeeping -----------------------------------------------------------------------

    async def _housekeep(self) -> None:
        """Watch the coordinators for a fatal failure, renew the key-range claims (or, without a
        range, follow them: :mod:`.unit_readers`), log metrics every ``metrics_interval_s``."""
        loop = asyncio.get_running_loop()
        next_log = loop.time() + self.config.metrics_interval_s
        next_renewal = next_follow = loop.time()  # at once: the claims were last read before the leases started
        while True:
            await asyncio.sleep(min(0.5, self.config.metrics_interval_s, self.config.lease_timing.renew_s))
            for reader in list(self.readers.values()):
                failure = reader.coordinator.failure if reader.coordinator else None
                if failure is not None:
                    self.handout.fail(failure)
                reader.acks.watch_ends(loop.time())
            if loop.time() >= next_renewal:
                next_renewal = loop.time() + self.config.lease_timing.renew_s
                await self._guard.renew()
            if loop.time() >= next_follow:
                await self.units.refresh()
                next_follow = loop.time() + self.units.follow_interval_s()
            if loop.time() >= next_log:
                next_log += self.config.metrics_interval_s
                log.info("%s", self.metrics.summary())

