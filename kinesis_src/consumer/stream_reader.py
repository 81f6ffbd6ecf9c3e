"""One stream's reader of one unit (:mod:`.units`) for a Consumer: leases, holdings, fetchers, acks.

A shard that misses the unit is written SHARD_END in the unit's lease set at once, unread; one the
unit does not cover is read filtered (:func:`kinesis_src.key_filter.filter_page`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lineage import KeyRange

from ..aws import DynamoDBClient, KinesisClient
from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..errors import (
    DataLossError,
    KinesisSourceError,
    LeaseLostError,
    ShardNotFoundError,
)
from ..key_filter import filter_page
from ..leases.coordinator import LeaseCoordinator
from ..leases.held_leases import HeldLeases
from ..leases.model import Checkpoint, Lease
from ..leases.shard_sync import ShardSync
from ..leases.stream_binding import abind_stream
from ..leases.table import LeaseTable
from ..leases.table_calls import TableCalls
from ..records import RecordPage
from ..retrieval.registration import FanOutTarget
from .acks import Acknowledger
from .batch import Batch
from .fetching import Fetcher, FetchSettings, new_fetcher
from .metrics import StreamMetrics
from .range_claims import RangeClaims
from .shard_state import EndAction, FilteredTail, HeldShard, Holdings, ShardPhase
from .signals import cancel
from .unit_split import UnitShardSync
from .units import FULL, UnitMap, scope_of

if TYPE_CHECKING:
    from .consumer_config import ConsumerConfig
    from .handout import Handout

log = logging.getLogger(__name__)

FILTERED_CHECKPOINT_INTERVAL_S = 60.0
"""At most one checkpoint of filtered-out records per straddled shard per this time: a failover reads
again at most about this much of other ranges' records, and an idle key range costs few writes."""


class StreamReader:
    """Reads one stream for a consumer; batches go to the consumer's queue (``handout.enqueue``)."""

    def __init__(
        self, config: ConsumerConfig, handout: Handout, stream: str, metrics: StreamMetrics, unit: KeyRange | None = None,
    ) -> None:
        self.config = config
        self.handout = handout
        self.stream = stream
        self.unit = unit or config.key_range or FULL
        self.key_range: KeyRange | None = None if self.unit == FULL else self.unit  # what is filtered
        self.scope = scope_of(self.unit)
        # shards labelled by key range; kept apart when this is not the worker's usual unit (#11)
        metrics = metrics.for_unit(self.scope, keyed=self.unit != (config.key_range or FULL))
        self.metrics = metrics
        self.fan_out: FanOutTarget | None = None  # EFO: its unit's own stream consumer (.unit_readers)
        self.coordinator: LeaseCoordinator | None = None
        self._claims: RangeClaims | None = None  # the stream's key-range claims, read before each shard sync
        self.held = HeldLeases[HeldShard]()  # the one held set: its coordinator's leases, this reader's holdings
        self.holdings = Holdings(self.held, metrics, config.prefetch_batches)
        self.filtered_checkpoint_interval_s = FILTERED_CHECKPOINT_INTERVAL_S
        self.acks = Acknowledger(
            config.worker_id, stream, self.holdings, metrics, lambda: self.coordinator,
            self.on_lost, handout.progressed, config.end_ack_warning_s,
        )

    # -- start and stop --------------------------------------------------------------------

    def lease_table(self) -> LeaseTable:
        c = self.config
        return LeaseTable(DynamoDBClient(c.settings), c.lease_table_name, c.application_name, self.stream,
                          scope=self.scope)

    async def anew_coordinator(self, table: LeaseTable) -> LeaseCoordinator:
        """Check the stream (missing: fails naming it; recreated: refused), then the coordinator."""
        summary = await self.handout.kinesis.describe_stream(self.stream)  # type: ignore[union-attr]
        if summary.identity is not None:
            await abind_stream(table, summary.identity, self.handout.dynamodb)  # type: ignore[arg-type]
        return self._coordinator(table)

    def _coordinator(self, table: LeaseTable) -> LeaseCoordinator:
        c = self.config
        calls = TableCalls(table, dynamodb=lambda: self.handout.dynamodb)
        sync = ShardSync(KinesisClient(c.settings), table, c.initial_position, calls=calls,
                         akinesis=lambda: self.handout.kinesis)
        return LeaseCoordinator(
            table,
            c.worker_id,
            timing=c.lease_timing,
            preserve_shard_order=c.preserve_shard_order,
            shard_sync=UnitShardSync(sync, self.unit, self._read_units),
            listener=self,
            held=self.held,
            calls=calls,
        )

    async def _read_units(self) -> UnitMap:
        if self._claims is None:
            self._claims = RangeClaims.of(self.config, self.stream)
        claims = self._claims
        return (await claims.aread_all(self.handout.dynamodb or BotocoreDynamoDB(claims.dynamodb)))[1]

    async def stop_fetching(self) -> None:
        """close(): deliver nothing more, stop every fetcher (the coordinator releases the leases)."""
        for shard in self.holdings.all():
            begin_release(shard)
            await cancel(shard.task)

    def held_shards(self) -> list[str]:
        return self.holdings.shard_ids()

    # -- the coordinator's listener (it runs on the same loop: direct calls) ---------------------------

    def on_acquired(self, lease: Lease) -> None:
        if self.handout.stopping:
            return  # close() releases it with the rest
        old = self.holdings.get(lease.shard_id)
        if old is not None:  # the coordinator dropped and re-took it; the old holding is over
            old.state.lose()
            self.holdings.forget(old)
        if self.key_range is not None and not self.key_range.overlaps(lease.hash_range):
            asyncio.get_running_loop().create_task(self._end_out_of_range(lease), name=f"skip-{lease.shard_id}")
            return
        start = lease.checkpoint.resume_position()
        if start is None:
            return
        shard = self.holdings.take(lease)
        shard.filtered_written_at = self.handout.now()
        fetcher = new_fetcher(
            self.handout.kinesis, self._fetch_settings(), self.stream, lease.shard_id, start,
            deliver=lambda page, s=shard: self._deliver(s, page),
            on_end=lambda page, s=shard: self._fetched_to_end(s, page),
            on_expired=self._checkpoint_expired if self.config.check_retention else None,
            on_deaggregated=self.metrics.count_aggregates, fan_out_counts=self.metrics,
        )
        shard.task = asyncio.create_task(self._fetch(shard, fetcher), name=f"fetch-{self.stream}-{lease.shard_id}")

    async def _end_out_of_range(self, lease: Lease) -> None:
        """A shard with no hash key in the range: SHARD_END in the range's lease set,
        unread, so its children follow. A write that fails for want of DynamoDB hands the lease back
        (kept, it would stay held with no fetcher and stall a merge child); a later take retries."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        try:
            await coordinator.ashard_ended(lease.shard_id, ())
        except LeaseLostError:
            return  # the coordinator dropped it; its new owner ends it
        except KinesisSourceError as exc:
            log.warning("consumer %s: shard %s (outside key range %s) not ended now (%s); its lease is "
                        "handed back and ended at its next take", self.config.worker_id, lease.shard_id,
                        self.key_range, exc)
            await self._hand_back(coordinator, lease.shard_id)
            return
        log.debug("consumer %s: shard %s of %r is outside key range %s: ended unread",
                  self.config.worker_id, lease.shard_id, self.stream, self.key_range)

    async def _hand_back(self, coordinator: LeaseCoordinator, shard_id: str) -> None:
        """Release a lease nobody reads; a release whose write fails leaves it to be adopted again."""
        try:
            await coordinator.arelease(shard_id)
        except KinesisSourceError as exc:
            log.warning("consumer %s: could not hand back shard %s (%s); the next cycle adopts it again",
                        self.config.worker_id, shard_id, exc)

    def _fetch_settings(self) -> FetchSettings:
        c = self.config
        return FetchSettings(c.max_records_per_fetch, c.pacing, c.strict_aggregation, self.fan_out)

    async def _checkpoint_expired(self, shard_id: str, checkpointed: str, oldest: str) -> None:
        """The record a holding resumes after is gone (retention): records after it may be lost."""
        self.metrics.checkpoints_expired += 1
        message = (
            f"stream {self.stream!r}, shard {shard_id}: the checkpointed record {checkpointed} is no longer "
            f"in the stream (trimmed past retention); reading resumes at the oldest record left, {oldest}. "
            "Records between the two, if there were any, expired before they were read"
        )
        if self.config.fail_on_data_loss:
            self.handout.fail(DataLossError(message + " (fail_on_data_loss=True)."))
            return
        log.warning("consumer %s: %s.", self.config.worker_id, message)

    def on_lost(self, lease: Lease, reason: str) -> None:
        shard = self.holdings.get(lease.shard_id)
        if shard is None or shard.lease.counter > lease.counter:
            return
        if shard.state.phase is ShardPhase.ENDING:
            return  # most likely the coordinator saw our own SHARD_END land; the write's outcome decides
        shard.state.lose()
        self.holdings.forget(shard)
        if not self.handout.stopping:
            self.metrics.leases_lost += 1
            log.warning("consumer %s lost shard %s of %r: %s", self.config.worker_id, lease.shard_id,
                        self.stream, reason)

    async def before_release(self, lease: Lease) -> None:
        await self.prepare_release(lease.shard_id)

    async def prepare_release(self, shard_id: str) -> None:
        """Graceful hand-off: stop fetching, then let the application finish the batch it holds."""
        shard = self.holdings.get(shard_id)
        if shard is None:
            return
        begin_release(shard)
        await cancel(shard.task)
        wait_s = self.config.release_wait_s()
        try:  # asyncio.timeout, not wait_for: in Python 3.11 it can lose a cancel that meets the wake-up
            async with asyncio.timeout(wait_s):
                await self.handout.until_not_in_flight(shard, self.stream)
                async with shard.lock:  # a checkpoint of this shard under way (not the batch in hand) lands first
                    pass
        except TimeoutError:
            in_hand = self.handout.in_flight
            log.warning(
                "consumer %s: releasing shard %s of %r while batch %d is still being processed (not "
                "checkpointed within %.1fs); its records will be delivered again to the next owner",
                self.config.worker_id, shard_id, self.stream, in_hand.index if in_hand else 0, wait_s,
            )
        if shard.state.phase is not ShardPhase.RELEASING:
            return  # its last batch was checkpointed meanwhile (ENDING, ENDED), or the lease was lost
        shard.state.released()
        self.holdings.forget(shard)
        self.metrics.leases_released += 1

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, shard: HeldShard, fetcher: Fetcher) -> None:
        try:
            await fetcher.run()
        except asyncio.CancelledError:
            raise
        except ShardNotFoundError as exc:
            log.warning("consumer %s: %s; it is skipped until the next shard sync removes its lease",
                        self.config.worker_id, exc)
        except Exception as exc:  # noqa: BLE001 - a fetch no retry can fix: the application must hear of it
            log.error("consumer %s: reading shard %s of %r failed: %s", self.config.worker_id, shard.shard_id,
                      self.stream, exc)
            self.handout.fail(exc)

    def _in_range(self, shard: HeldShard, page: RecordPage) -> RecordPage:
        """The page's records inside the key range (all of them without one, or when it covers the shard).
        A page whose last records are left out notes their position, to be checkpointed (:mod:`.acks`)."""
        if self.key_range is None or not len(page) or self.key_range.covers(shard.lease.hash_range):
            return page
        kept = filter_page(page, self.key_range)
        self.metrics.records_filtered += len(page) - len(kept)
        tail = filtered_tail(page, kept, shard.state.produced)
        if tail is not None:
            shard.filtered = tail
        return kept

    async def _deliver(self, shard: HeldShard, page: RecordPage, filtered: bool = False) -> None:
        metrics = self.metrics.shards.get(shard.shard_id)
        if metrics is not None:
            metrics.millis_behind_latest = page.millis_behind_latest
        if not filtered:
            page = self._in_range(shard, page)
        if len(page):
            await shard.slots.acquire()
            self._enqueue(shard, page, shard.state.produce())
        if shard.filtered is not None and not filtered:
            await self.acks.checkpoint_filtered(shard, self.handout.now(), self.filtered_checkpoint_interval_s)

    def _enqueue(self, shard: HeldShard, page: RecordPage, index: int) -> None:
        self.handout.enqueue(
            Batch(self.stream, shard.shard_id, page, index, shard.generation, self.acks.checkpoint, shard.state)
        )

    async def _fetched_to_end(self, shard: HeldShard, page: RecordPage) -> None:
        """The final page: its records (if any) are the last batch; then the end decides what ends the shard.

        The end batch carries no records: the application may have taken the final page's own batch
        while a checkpoint held the lock, and those records were delivered once already."""
        page = self._in_range(shard, page)
        await self._deliver(shard, page, filtered=True)
        async with shard.lock:  # no checkpoint of this shard is half-way while the end is judged
            action = shard.state.see_end(page.child_shards, self.handout.now())
            if action is EndAction.DELIVER_END_BATCH:
                await shard.slots.acquire()  # free: every batch of this holding was handed out
                self._enqueue(shard, page.slice(0), shard.state.produced)
            elif action is EndAction.END_NOW:
                await self.acks.end_from_fetcher(shard)

    # -- what the consumer asks per batch -------------------------------------------------------

    def count_delivery(self, batch: Batch) -> None:
        nbytes = batch.byte_count  # a sum over the page: once
        self.metrics.records += len(batch)
        self.metrics.bytes += nbytes
        self.metrics.batches += 1
        if self.coordinator is not None:  # the balancer weighs leases by what they deliver
            self.coordinator.report_throughput(batch.shard_id, len(batch), nbytes)
        shard = self.metrics.shards.get(batch.shard_id)
        if shard is not None:
            shard.records += len(batch)
            shard.bytes += nbytes
            shard.last_sequence_number = batch.last_sequence_number or shard.last_sequence_number

    def trusted(self) -> bool:
        """See :mod:`.delivery`: this stream's coordinator renewed and read the table lately."""
        coordinator = self.coordinator
        return coordinator is None or coordinator.failure is not None or (
            coordinator.is_live() and coordinator.view_is_fresh()
        )


def filtered_tail(page: RecordPage, kept: RecordPage, produced: int) -> FilteredTail | None:
    """The position of ``page``'s last record if the filter left it out, after the batch ``kept``
    becomes (if any); None if the last record was kept (its batch's checkpoint covers it)."""
    last = len(page) - 1
    position = (page.sequence_numbers[last], page.sub_sequence(last))
    if len(kept) and (kept.sequence_numbers[-1], kept.sub_sequence(len(kept) - 1)) == position:
        return None
    return FilteredTail(Checkpoint.sequence(*position), produced + (1 if len(kept) else 0))


def begin_release(shard: HeldShard) -> None:
    """Stop deliveries. close() starts every release before the coordinator's before_release asks
    again; a shard whose SHARD_END write is under way (ENDING) is left to that write."""
    if shard.state.delivering:
        shard.state.release()
