"""Acknowledgement: what ``batch.checkpoint()`` writes, and how a closed shard ends.

A shard's checkpoints are written one at a time under its holding's lock and never step back; a
SHARD_END that cannot be written drops that shard only (docs/consumer.md, "The end of a shard")."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from ..errors import (
    ConfigurationError,
    KinesisSourceError,
    LeaseLostError,
    RetriesExhaustedError,
)
from ..leases.coordinator import LeaseCoordinator
from ..leases.model import Checkpoint, Lease
from ..records import Record
from .batch import Batch
from .metrics import ConsumerMetrics
from .shard_state import HeldShard, Holdings, ShardPhase

log = logging.getLogger(__name__)


class Acknowledger:
    """Turns checkpoints of the consumer's batches into fenced lease writes (and SHARD_END).

    ``coordinator`` returns the lease coordinator at each use (there is one once ``start()`` ran);
    ``on_lost`` handles a lease lost under a checkpoint; ``on_progress`` wakes a waiting release."""

    def __init__(
        self,
        worker_id: str,
        stream: str,
        holdings: Holdings,
        metrics: ConsumerMetrics,
        coordinator: Callable[[], LeaseCoordinator | None],
        on_lost: Callable[[Lease, str], None],
        on_progress: Callable[[], None],
        warn_after_s: float,
    ) -> None:
        self.worker_id = worker_id
        self.stream = stream
        self.holdings = holdings
        self.metrics = metrics
        self.coordinator = coordinator
        self.on_lost = on_lost
        self.on_progress = on_progress
        self.warn_after_s = warn_after_s

    # -- checkpoints ------------------------------------------------------------------------

    async def checkpoint(self, batch: Batch, record: Record | None = None) -> None:
        """``batch.checkpoint(record)``: every record of the shard up to ``record`` (default: the
        batch's last) is processed. Inside a KPL aggregate the checkpoint names the user record
        (sequence and sub-sequence number), and a new owner resumes right after it."""
        row = _row_of(batch, record)
        shard = self._current(batch)
        async with shard.lock:
            shard = self._current(batch)
            if batch.index <= shard.state.acknowledged:
                return
            if row is not None:
                await self._checkpoint_inside(shard, batch, row)
            elif shard.state.covers_end(batch.index):
                await self.end(shard, batch.index)
            else:
                page = batch.page
                await self._write(shard, Checkpoint.sequence(page.sequence_numbers[-1], page.sub_sequence(len(page) - 1)))
                _acknowledge(shard, batch.index)
            self.on_progress()

    async def _checkpoint_inside(self, shard: HeldShard, batch: Batch, row: int) -> None:
        """A checkpoint at a record before the batch's last: earlier batches are done, this one is not."""
        mark = (batch.index, row)
        if shard.partly_acknowledged is not None and mark <= shard.partly_acknowledged:
            return  # never a step back
        page = batch.page
        await self._write(shard, Checkpoint.sequence(page.sequence_numbers[row], page.sub_sequence(row)))
        shard.partly_acknowledged = mark
        if batch.index - 1 > shard.state.acknowledged:
            _acknowledge(shard, batch.index - 1)

    def _current(self, batch: Batch) -> HeldShard:
        shard = self.holdings.of(batch.generation, batch.shard_id)
        if shard is None or not shard.state.accepts_checkpoints:
            raise LeaseLostError(
                f"worker {self.worker_id} no longer holds the lease on shard {batch.shard_id} of stream "
                f"{self.stream!r} (taken over, or released); nothing was written. Its new owner delivers "
                "the records after the last checkpoint again.",
                batch.shard_id,
            )
        return shard

    async def _write(self, shard: HeldShard, checkpoint: Checkpoint) -> None:
        try:
            began = time.perf_counter()
            lease = await self._coordinator().acheckpoint(shard.shard_id, checkpoint, shard.lease.counter)
        except LeaseLostError:
            self.on_lost(shard.lease, "checkpoint rejected: lease taken over")
            raise
        shard.lease = lease
        self.metrics.checkpoints += 1
        self.metrics.checkpoint_write_us += _micros_since(began)
        metrics = self.metrics.shards.get(lease.shard_id)
        if metrics is not None:
            metrics.checkpoint = str(checkpoint)

    async def checkpoint_filtered(self, shard: HeldShard, now: float, interval_s: float) -> None:
        """Checkpoint past records a key range filtered out, when due (:meth:`HeldShard.filtered_due`):
        else the checkpoint of a straddled shard stays at its last in-range record, which expires
        while the rest is read, and the next holder reports a loss. Shielded: a write under way
        lands, and its bookkeeping is done, before a release of the shard goes on."""
        if shard.filtered_due(now, interval_s) is not None:
            await asyncio.shield(self._write_filtered(shard, now, interval_s))

    async def _write_filtered(self, shard: HeldShard, now: float, interval_s: float) -> None:
        async with shard.lock:
            tail = shard.filtered_due(now, interval_s)  # again: a checkpoint may have landed meanwhile
            if tail is None or self.holdings.of(shard.generation, shard.shard_id) is not shard:
                return
            shard.filtered_written_at = now  # a failed write, too, is tried again only after the interval
            try:
                await self._write(shard, tail.checkpoint)
            except LeaseLostError:
                return  # dropped by on_lost, like any checkpoint after a lost lease
            except KinesisSourceError as exc:
                log.warning("consumer %s: checkpoint past filtered records of shard %s failed (%s); tried "
                            "again later", self.worker_id, shard.shard_id, exc)
                return
            if shard.filtered is tail:
                shard.filtered = None

    # -- SHARD_END ----------------------------------------------------------------------------

    async def end(self, shard: HeldShard, index: int) -> None:
        """Batch ``index`` covers the shard's last record: write SHARD_END (children leasable).

        Raises LeaseLostError, after dropping the shard, if the write failed for want of the lease
        or of DynamoDB. Shielded: a cancelled caller (a release, close) never leaves it ENDING."""
        shard.state.begin_end()
        failure = await asyncio.shield(self._write_end(shard, index))
        if failure is not None:
            raise failure

    async def _write_end(self, shard: HeldShard, index: int) -> LeaseLostError | None:
        children = shard.state.end.children if shard.state.end else ()
        try:
            began = time.perf_counter()
            await self._coordinator().ashard_ended(shard.shard_id, children,
                                                   counter=shard.lease.counter)  # fenced on this holding's lease
        except (LeaseLostError, RetriesExhaustedError) as exc:
            await self._end_failed(shard, exc)
            self.on_progress()
            return exc if isinstance(exc, LeaseLostError) else self._gave_up(shard, exc)
        if shard.state.phase is ShardPhase.ENDING:  # else LOST: a re-take replaced this holding meanwhile
            shard.state.acknowledge(index)
            shard.state.ended()
        self.metrics.checkpoints += 1
        self.metrics.checkpoint_write_us += _micros_since(began)
        self.metrics.shards_ended += 1
        self.holdings.forget(shard)
        self.on_progress()  # a release waiting for this shard's batch in hand: the shard is over
        return None

    def _gave_up(self, shard: HeldShard, cause: RetriesExhaustedError) -> LeaseLostError:
        error = LeaseLostError(
            f"worker {self.worker_id} could not write SHARD_END for shard {shard.shard_id} of stream "
            f"{self.stream!r} ({cause}) and gave the shard up; its next owner reads its last records "
            "again and ends it.",
            shard.shard_id,
        )
        error.__cause__ = cause
        return error

    async def end_from_fetcher(self, shard: HeldShard) -> None:
        """Everything delivered was acknowledged when the end was seen: end it, never failing the consumer."""
        try:
            await self.end(shard, shard.state.acknowledged)
        except LeaseLostError:
            pass  # dropped, counted and logged by _end_failed

    async def _end_failed(self, shard: HeldShard, error: KinesisSourceError) -> None:
        """Drop the shard. Retrying could not help: a first attempt that landed (its response lost)
        fences every retry. After a lost lease the coordinator has let go already; after exhausted
        retries it still holds the lease, so it is given back (or, if DynamoDB stays away, expires),
        unless a re-take replaced this holding meanwhile: the lease held now is the new holding's."""
        current = self.holdings.get(shard.shard_id) is shard
        shard.state.lose()
        self.holdings.forget(shard)
        self.metrics.shard_ends_failed += 1
        self.metrics.leases_lost += 1
        log.warning(
            "consumer %s: SHARD_END for shard %s failed (%s: %s); dropping the shard, whose next owner "
            "reads it again from checkpoint %s and ends it",
            self.worker_id, shard.shard_id, type(error).__name__, error, shard.lease.checkpoint,
        )
        if isinstance(error, RetriesExhaustedError) and current:
            await self._give_back(shard.shard_id)

    async def _give_back(self, shard_id: str) -> None:
        try:
            await self._coordinator().arelease(shard_id)
        except KinesisSourceError as exc:
            log.warning("consumer %s: could not release shard %s (%s); it will expire", self.worker_id, shard_id, exc)

    def _coordinator(self) -> LeaseCoordinator:
        coordinator = self.coordinator()
        if coordinator is None:
            raise RuntimeError("the consumer writes checkpoints only after start()")
        return coordinator

    # -- ends nobody acknowledges ---------------------------------------------------------

    def watch_ends(self, now: float) -> None:
        """Update the past-end gauge and per-shard ages; warn once per holding that is overdue."""
        overdue = 0
        for shard in self.holdings.all():
            held_s = shard.state.past_end_s(now)
            metrics = self.metrics.shards.get(shard.shard_id)
            if metrics is not None:
                metrics.held_past_end_s = held_s
            if held_s is None or held_s < self.warn_after_s:
                continue
            overdue += 1
            if not shard.state.overdue_reported:
                shard.state.overdue_reported = True
                self._warn_overdue(shard, held_s)
        self.metrics.shards_held_past_end = overdue

    def _warn_overdue(self, shard: HeldShard, held_s: float) -> None:
        children = shard.state.end.children if shard.state.end else ()
        log.warning(
            "consumer %s: shard %s was read to its end %.0fs ago, but its batch with ends_shard=True is not "
            "checkpointed; its child shards (%s) are not assigned until it is. Always checkpoint a batch "
            "whose ends_shard is True.",
            self.worker_id, shard.shard_id, held_s, ", ".join(c.shard_id for c in children) or "none named",
        )


def _acknowledge(shard: HeldShard, index: int) -> None:
    """Book a checkpoint that was written. A release that gave up waiting for the write (it outlasted
    ``release_wait_s``) may have ended the holding meanwhile; the write landed while the lease was ours,
    and the next owner starts after it or before it: nothing is left to book."""
    if shard.state.accepts_checkpoints:
        shard.state.acknowledge(index)


def _row_of(batch: Batch, record: Record | None) -> int | None:
    """The row of ``record`` in ``batch``; None for the whole batch (no record, or its last).
    ConfigurationError for a record not of this batch: a checkpoint is a position in this shard."""
    if record is None:
        return None
    page = batch.page
    if record.shard_id != batch.shard_id:
        raise ConfigurationError(
            f"batch.checkpoint(record): the record is from shard {record.shard_id}, the batch from "
            f"{batch.shard_id}; checkpoint each record through its own batch"
        )
    for row in range(len(page) - 1, -1, -1):
        if page.sequence_numbers[row] == record.sequence_number and page.sub_sequence(row) == record.sub_sequence_number:
            return None if row == len(page) - 1 else row
    raise ConfigurationError(
        f"batch.checkpoint(record): record {record.sequence_number}/{record.sub_sequence_number} is not in "
        f"this batch of shard {batch.shard_id}; checkpoint it through the batch that delivered it"
    )


def _micros_since(began: float) -> int:
    return round((time.perf_counter() - began) * 1_000_000)
