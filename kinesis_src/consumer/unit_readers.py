"""Which units of each stream a consumer reads (:mod:`.units`), and its readers' changes at runtime.

A worker without a range follows the claims; each kind writes its mark (heartbeat, claim) before it
reads the other's, so neither misses the other (docs/consumer.md, "Sticky key ranges")."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Awaitable, TypeVar

from lineage import KeyRange

from ..clock import since_boot
from ..errors import ConsumerLimitError, KinesisSourceError
from ..leases.expiry import ExpiryJudge
from ..retrieval.registration import ConsumerMode, Registrations, unit_consumer_name
from .batch import Batch
from .range_claims import RangeClaims, live_and_dead
from .shard_state import HeldShard
from .stream_list import note_stream_list
from .stream_reader import StreamReader
from .unit_split import Beat, split_unit, unit_table, wait_until_unread
from .units import FULL, Split, describe, scope_of

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from ..leases.coordinator import LeaseCoordinator
    from .consumer_config import ConsumerConfig
    from .handout import Handout
    from .key_range_guard import KeyRangeGuard
    from .metrics import StreamMetrics

log = logging.getLogger(__name__)

MAX_ROUNDS = 20
T = TypeVar("T")


async def finish_split(dynamodb: AsyncDynamoDB, claims: RangeClaims, split: Split, worker_id: str,
                       beat: Beat | None = None) -> None:
    """Split the unit's leases, then record its pieces as units (idempotent; anyone may finish a split)."""
    await split_unit(dynamodb, claims, split, worker_id, beat)
    for _ in range(MAX_ROUNDS):
        version, units, _ = await claims.aread_all(dynamodb)
        if split.unit not in units.units or await claims.arecord_units(dynamodb, version, units.after(split)):
            return
    raise KinesisSourceError(f"could not record the split of {split.unit} on stream {claims.stream!r}; retry")


async def settle_claim(dynamodb: AsyncDynamoDB, claims: RangeClaims, key_range: KeyRange, worker_id: str,
                       beat: Beat | None = None) -> tuple[KeyRange, ...]:
    """A sticky worker's units, once its claim is a union of units that no worker without a range reads."""
    for _ in range(MAX_ROUNDS):
        version, units, holders = await claims.aread_all(dynamodb)
        if pending := units.splitting(key_range):
            for split in pending:
                await finish_split(dynamodb, claims, split, worker_id, beat)
        elif not units.is_union(key_range):  # a split of someone else's was under way when we claimed
            await claims.arecord_units(dynamodb, version, units.with_claim(key_range, worker_id))
        else:
            break
    else:
        raise KinesisSourceError(f"key range {key_range} on stream {claims.stream!r}: units kept changing; retry")
    sticky = {c.worker_id for c in holders}
    for unit in units.inside(key_range):
        await wait_until_unread(unit_table(claims, scope_of(unit)), dynamodb, claims.failover_s, sticky, beat)
    return units.inside(key_range)


async def while_beating(work: Awaitable[T], beat: Beat, every_s: float) -> T:
    """``work`` while ``beat`` runs every ``every_s``: a sticky worker's claims must not look dead while
    it waits for EFO registrations (ACTIVE takes seconds). A beat that fails cancels the work."""
    task = asyncio.ensure_future(work)
    try:
        while not (await asyncio.wait({task}, timeout=every_s))[0]:
            await beat()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task.result()


class SplitLeft(Exception):
    """A background split stopped half-way because its consumer is closing."""


class UnitReaders:
    """The consumer's readers, one per (stream, unit): planned at start, followed at runtime."""

    def __init__(self, config: ConsumerConfig, handout: Handout, stream_metrics: dict[str, StreamMetrics]) -> None:
        self.config = config
        self.handout = handout
        self.stream_metrics = stream_metrics
        self.readers = {s: self._reader(s) for s in config.streams}  # key: see key()
        self.default_unit = config.key_range or FULL
        self.watch = {s: ExpiryJudge(config.lease_timing.failover_s, since_boot) for s in config.streams}
        self._claims: dict[str, RangeClaims] = {}
        self._work: set[asyncio.Future[Any]] = set()  # background splits a close() must wait for
        self._finishing: set[tuple[str, KeyRange]] = set()
        self._orphans: list[Split] = []  # splits whose claimer is gone, found by the last _free()
        self._claimed: dict[str, bool] = {}  # per stream: did the last read find a claim or a split?
        # readers whose coordinator is starting: it takes leases and fetches before the start returns,
        # so their batches must be found (holding_of) before they join self.readers
        self._starting: dict[str, StreamReader] = {}
        self.fan_outs = Registrations()  # EFO: every stream consumer this worker registered

    def key(self, stream: str, unit: KeyRange) -> str:
        """The reader's key in ``readers``: the stream for its usual unit, else ``stream@scope``."""
        return stream if unit == self.default_unit else f"{stream}@{scope_of(unit)}"

    def _reader(self, stream: str, unit: KeyRange | None = None) -> StreamReader:
        return StreamReader(self.config, self.handout, stream, self.stream_metrics[stream], unit)

    def claims(self, stream: str) -> RangeClaims:
        if stream not in self._claims:
            self._claims[stream] = RangeClaims.of(self.config, stream)
        return self._claims[stream]

    def holding_of(self, batch: Batch) -> tuple[StreamReader | None, HeldShard | None]:
        """The reader and holding a batch came from, while it is current (holding numbers are unique)."""
        for reader in [*self.readers.values(), *self._starting.values()]:
            if reader.stream == batch.stream and (shard := reader.holdings.of(batch.generation, batch.shard_id)):
                return reader, shard
        return None, None

    def held_shards(self) -> list[str]:
        """Shard ids held now, in stream order; with several streams, ``"<stream>/<shard id>"``."""
        streams = self.config.streams
        held = {(r.stream, shard) for r in list(self.readers.values()) for shard in r.held_shards()}
        ordered = sorted(held, key=lambda h: (streams.index(h[0]), h[1]))
        return [shard if len(streams) == 1 else f"{stream}/{shard}" for stream, shard in ordered]

    # -- at start -------------------------------------------------------------------------------

    async def prepare(self, guard: KeyRangeGuard) -> None:
        """The table, the stream list, each stream checked (missing: fails naming it; recreated:
        refused), the key range claimed, then one reader per unit read, each with its coordinator."""
        config, dynamodb = self.config, self.handout.dynamodb
        assert dynamodb is not None, "prepare() runs once the consumer's clients are open"
        tables = {stream: reader.lease_table() for stream, reader in self.readers.items()}
        await next(iter(tables.values())).aensure_table(dynamodb)
        await note_stream_list(dynamodb, config.lease_table_name, config.application_name, config.streams)
        for stream, reader in self.readers.items():
            reader.coordinator = await reader.anew_coordinator(tables[stream])
        await guard.before_start()
        await self.plan(guard.claims, guard.beat_if_due)

    async def plan(self, claimed: dict[str, RangeClaims], beat: Beat) -> None:
        """Replace the consumer's readers by one per unit it reads now (reusing a reader whose unit is the same)."""
        config, dynamodb = self.config, self.handout.dynamodb
        old, self.readers = self.readers, {}
        for stream in config.streams:
            if config.key_range is not None:
                units = await settle_claim(dynamodb, claimed[stream], config.key_range,  # type: ignore[arg-type]
                                           config.worker_id, beat)
            else:
                units = await self._afree(stream, dynamodb)  # type: ignore[arg-type]
            for unit in units:
                key = self.key(stream, unit)
                reader = old.get(key) or self._reader(stream, unit)
                if reader.coordinator is None:
                    reader.coordinator = await reader.anew_coordinator(reader.lease_table())
                self.readers[key] = reader
        if config.consumer_mode is ConsumerMode.EFO:
            await while_beating(self._register_fan_outs(), beat, config.lease_timing.renew_s)

    async def _register_fan_outs(self) -> None:
        """One reader's at a time, as at runtime: RegisterStreamConsumer allows 5 calls a second."""
        for reader in self.readers.values():
            await self.aregister_fan_out(reader)

    async def start_reader(self, reader: StreamReader) -> bool:
        """Start the reader's coordinator; False, leaving no heartbeat, if its unit is not free.
        Without a range the unit's heartbeat goes first, right before the coordinator starts (one
        without a coordinator would be dealt leases nobody reads); a start that fails removes it."""
        if not await self._unit_still_free(reader):
            return False
        coordinator: LeaseCoordinator = reader.coordinator  # type: ignore[assignment]  # plan() gave it one
        await coordinator.astart()  # a start that fails stops itself
        return True

    async def _unit_still_free(self, reader: StreamReader) -> bool:
        """Without a range: the heartbeat, then the claims read again; False, no heartbeat left, if the
        unit was claimed meanwhile."""
        coordinator: LeaseCoordinator = reader.coordinator  # type: ignore[assignment]
        if self.config.key_range is not None:
            return True
        try:
            await coordinator.renewal.aregister()
            if self.handout.stopping or reader.unit not in await self._afree(reader.stream, self.handout.dynamodb):
                await coordinator.astop(release=False)
                return False
        except BaseException:
            await coordinator.astop(release=True)
            raise
        return True

    async def aregister_fan_out(self, reader: StreamReader) -> None:
        """EFO: the stream consumer of the reader's unit, registered (or found) and ACTIVE."""
        if self.config.consumer_mode is ConsumerMode.EFO and reader.fan_out is None:
            reader.fan_out = await self.fan_outs.aregister(self.handout.kinesis, reader.stream,  # type: ignore[arg-type]
                                                           self._fan_out_name(reader))

    def _fan_out_name(self, reader: StreamReader) -> str:
        return unit_consumer_name(self.config.consumer_name, reader.scope, scope_of(self.default_unit))  # type: ignore[arg-type]

    async def deregister_fan_outs(self) -> list[KinesisSourceError]:
        """With ``require_consumer_deregistration``: every consumer this worker registered, read now or
        before a hand-over; each failure is logged and returned."""
        if not self.config.require_consumer_deregistration or not self.fan_outs.targets():
            return []
        return await self.fan_outs.aderegister_all(self.handout.kinesis)  # type: ignore[arg-type]

    async def _afree(self, stream: str, dynamodb: AsyncDynamoDB) -> tuple[KeyRange, ...]:
        """Units no live claim overlaps and nobody splits (dead claims are deleted; orphan splits noted)."""
        claims = self.claims(stream)
        _, units, found = await claims.aread_all(dynamodb)
        self._claimed[stream] = bool(found or units.splits)
        live, dead = live_and_dead(self.watch[stream], found)
        for claim in dead:
            if await claims.adelete_dead(dynamodb, claim):
                log.warning("stream %r: removed the claim of a dead worker: %s", stream, claim.describe())
        self._orphans = [s for s in units.splits if s.claimer not in {c.worker_id for c in live}]
        return units.unclaimed([c.key_range for c in live])

    # -- at runtime, on the loop (housekeeping) -----------------------------------------------------

    def follow_interval_s(self) -> float:
        """How long until the claims are read again: a renewal interval while any stream has a claim or a
        split (claims move, and a dead one is judged by watching it), the failover time while none has
        (a first claim is then seen within failover + renewal; its worker waits for that, nothing is lost)."""
        timing = self.config.lease_timing
        quiet = all(self._claimed.get(stream) is False for stream in self.config.streams)
        return timing.failover_s if quiet else timing.renew_s

    async def refresh(self) -> None:
        """Without a range: follow the claims (hand units over, take freed ones up, finish
        orphan splits). A failure no retry can fix fails the consumer, not housekeeping."""
        if self.config.key_range is not None:
            return
        try:
            await self._refresh()
        except Exception as exc:  # noqa: BLE001 - the application must hear of it
            log.error("consumer %s: following the key-range claims failed: %s", self.config.worker_id, exc)
            self.handout.fail(exc)

    async def _refresh(self) -> None:
        c, handout = self.config, self.handout
        for stream in c.streams:
            if handout.stopping:
                return
            try:
                free = await self._afree(stream, handout.dynamodb)
            except KinesisSourceError as exc:  # transient: the next tick reads again
                log.warning("consumer %s: could not read the key-range claims of %r: %s", c.worker_id, stream, exc)
                continue
            for split in self._orphans:
                self._finish(stream, split)
            for key, reader in list(self.readers.items()):
                if reader.stream == stream and reader.unit not in free:
                    await self._stop(key, reader)
            for unit in free:
                if not handout.stopping and self.key(stream, unit) not in self.readers:
                    await self._start(stream, unit)

    async def _stop(self, key: str, reader: StreamReader) -> None:
        log.info("consumer %s: %s of %r is claimed or being split: handing it over", self.config.worker_id,
                 describe(reader.unit), reader.stream)
        await reader.stop_fetching()
        if reader.coordinator is not None:
            await reader.coordinator.astop()
        self.readers.pop(key, None)

    async def _start(self, stream: str, unit: KeyRange) -> None:
        c = self.config
        reader = self._reader(stream, unit)
        key = self.key(stream, unit)
        self._starting[key] = reader
        try:
            if await self._start_reader_of(reader):
                log.info("consumer %s: reading %s of %r", c.worker_id, describe(unit), stream)
                self.readers[key] = reader
        except ConsumerLimitError as exc:  # nobody can read the unit until a consumer slot is freed
            log.error("consumer %s: cannot read unit %s of %r: %s", c.worker_id, unit, stream, exc)
            self.handout.fail(exc)
        except KinesisSourceError as exc:
            log.warning("consumer %s: could not start reading unit %s of %r (next tick retries): %s",
                        c.worker_id, unit, stream, exc)
        finally:
            self._starting.pop(key, None)

    async def _start_reader_of(self, reader: StreamReader) -> bool:
        await self.aregister_fan_out(reader)  # first: the coordinator may start fetching before start() returns
        reader.coordinator = await reader.anew_coordinator(reader.lease_table())
        if not await self.start_reader(reader):
            return False
        if self.handout.stopping:  # close() began meanwhile and will not see this reader
            await reader.coordinator.astop(release=True)  # type: ignore[union-attr]
            return False
        return True

    def _finish(self, stream: str, split: Split) -> None:
        """Finish a split whose claimer is gone, in the background (it waits for the unit's readers).
        close() waits for it (drain), and it stops at its next beat once the consumer stops."""
        if (stream, split.unit) in self._finishing:
            return
        self._finishing.add((stream, split.unit))
        c = self.config
        future = asyncio.ensure_future(finish_split(self.handout.dynamodb, self.claims(stream), split,  # type: ignore[arg-type]
                                                    c.worker_id, self._unless_stopping))
        self._work.add(future)
        future.add_done_callback(self._work.discard)

        def done(t: asyncio.Future[None]) -> None:
            self._finishing.discard((stream, split.unit))
            error = None if t.cancelled() else t.exception()
            if isinstance(error, SplitLeft):
                log.info("consumer %s: the split of %s on %r is left to the next worker: %s",
                         c.worker_id, split.unit, stream, error)
            elif error is not None:
                log.warning("consumer %s: finishing the split of %s on %r failed (next tick retries): %s",
                            c.worker_id, split.unit, stream, error)

        future.add_done_callback(done)

    async def _unless_stopping(self) -> None:
        """The beat of a background split: it ends the split once close() began (any worker may finish
        it later, every step is idempotent), so nothing of it writes after close() returns."""
        if self.handout.stopping:
            raise SplitLeft(f"consumer {self.config.worker_id} is closing")

    async def drain(self) -> None:
        """Wait for reader starts and stops, and background splits, under way (close(): no coordinator
        may outlive the consumer, and no split may write after it)."""
        if self._work:
            await asyncio.gather(*self._work, return_exceptions=True)
