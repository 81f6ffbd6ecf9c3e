"""One held shard's lifecycle in the consumer: an explicit state, changed only by named transitions.

The transitions are ``_NEXT`` (modelled on the KCL's ShardConsumer states); any other is a bug in
the caller and raises, instead of corrupting the bookkeeping that decides when a shard ends."""

from __future__ import annotations

import asyncio
import enum
import itertools
from dataclasses import dataclass, field

from ..leases.held_leases import HeldLeases
from ..leases.model import Checkpoint, Lease
from ..records import ChildShard
from .metrics import ConsumerMetrics, ShardMetrics


class ShardPhase(str, enum.Enum):
    FETCHING = "fetching"
    END_SEEN = "end_seen"
    RELEASING = "releasing"
    ENDING = "ending"
    ENDED = "ended"
    RELEASED = "released"
    LOST = "lost"


_NEXT: dict[ShardPhase, frozenset[ShardPhase]] = {
    ShardPhase.FETCHING: frozenset({ShardPhase.END_SEEN, ShardPhase.RELEASING, ShardPhase.LOST}),
    ShardPhase.END_SEEN: frozenset({ShardPhase.ENDING, ShardPhase.RELEASING, ShardPhase.LOST}),
    ShardPhase.RELEASING: frozenset({ShardPhase.ENDING, ShardPhase.RELEASED, ShardPhase.LOST}),
    ShardPhase.ENDING: frozenset({ShardPhase.ENDED, ShardPhase.LOST}),
    ShardPhase.ENDED: frozenset(),
    ShardPhase.RELEASED: frozenset(),
    ShardPhase.LOST: frozenset(),
}
_DELIVERING = frozenset({ShardPhase.FETCHING, ShardPhase.END_SEEN})
_TERMINAL = frozenset(phase for phase, nxt in _NEXT.items() if not nxt)
_GENERATIONS = itertools.count(1)  # holding numbers, unique in the process


class EndAction(str, enum.Enum):
    """What the consumer does when the fetcher reads a shard's final page (see :meth:`ShardState.see_end`)."""

    END_NOW = "end now"  # every batch delivered is acknowledged: write SHARD_END from the fetch task
    LAST_QUEUED = "last queued"  # the batch with the last records still waits in the queue: it ends the shard
    DELIVER_END_BATCH = "deliver end batch"  # the application passed that batch over: send an empty one that ends it


@dataclass(frozen=True)
class ShardEnd:
    """The shard's end as the fetcher saw it. ``last_index``: the batch holding the shard's last
    record (0: none delivered); a checkpoint of it, or of any later batch, writes SHARD_END."""

    children: tuple[ChildShard, ...]
    last_index: int
    seen_at: float  # event-loop (monotonic) time


@dataclass
class ShardState:
    """Phase and batch counters of one holding of one shard. Batches are numbered from 1."""

    shard_id: str
    phase: ShardPhase = ShardPhase.FETCHING
    produced: int = 0  # batches made (the empty end batch included)
    handed_out: int = 0  # highest batch number given to the application
    acknowledged: int = 0  # highest batch number checkpointed
    end: ShardEnd | None = None
    overdue_reported: bool = False  # the "held past its end" warning is logged once per holding
    owner_switches: int = 0
    """The lease's ``owner_switches_since_checkpoint`` when this holding took it (this take included):
    how many holders, this one counted, received the records after the checkpoint."""

    # -- questions -----------------------------------------------------------------

    @property
    def delivering(self) -> bool:
        """Queued batches may still go to the application."""
        return self.phase in _DELIVERING

    @property
    def accepts_checkpoints(self) -> bool:
        return self.phase not in _TERMINAL

    @property
    def terminal(self) -> bool:
        return self.phase in _TERMINAL

    def covers_end(self, index: int) -> bool:
        """True if a checkpoint of batch ``index`` acknowledges the shard's last record."""
        return self.end is not None and index >= self.end.last_index

    def past_end_s(self, now: float) -> float | None:
        """How long the end has been seen without the shard being ended; None if not seen or finished."""
        if self.end is None or self.terminal:
            return None
        return now - self.end.seen_at

    # -- counters --------------------------------------------------------------------

    def produce(self) -> int:
        """Number the next batch made from a fetched page."""
        self._require(ShardPhase.FETCHING, "make a batch")
        self.produced += 1
        return self.produced

    def hand_out(self, index: int) -> None:
        self._require_delivering("hand out a batch")
        self.handed_out = max(self.handed_out, index)

    def acknowledge(self, index: int) -> bool:
        """Record a successful checkpoint; False if an equal or later batch was acknowledged already."""
        if not self.accepts_checkpoints:
            raise self._illegal("acknowledge a batch")
        if index <= self.acknowledged:
            return False
        self.acknowledged = index
        return True

    # -- transitions -------------------------------------------------------------------

    def see_end(self, children: tuple[ChildShard, ...], now: float) -> EndAction:
        """FETCHING -> END_SEEN, once the final page's records (if any) became a batch.
        END_NOW if that batch is acknowledged, LAST_QUEUED if it is still queued; else (handed out,
        not acknowledged) an empty batch follows that ends the shard, as in the KCL's shardEnded."""
        self._move(ShardPhase.END_SEEN)
        self.end = ShardEnd(children, self.produced, now)
        if self.acknowledged == self.produced:
            return EndAction.END_NOW
        if self.handed_out < self.produced:
            return EndAction.LAST_QUEUED
        self.produced += 1
        return EndAction.DELIVER_END_BATCH

    def begin_end(self) -> None:
        """The SHARD_END write starts (its batch covers the last record)."""
        if self.end is None:
            raise self._illegal("end a shard whose end was never seen")
        self._move(ShardPhase.ENDING)

    def ended(self) -> None:
        """SHARD_END was written."""
        self._move(ShardPhase.ENDED)

    def release(self) -> None:
        """A graceful hand-off begins: deliver nothing more, keep accepting checkpoints."""
        self._move(ShardPhase.RELEASING)

    def released(self) -> None:
        self._move(ShardPhase.RELEASED)

    def lose(self) -> None:
        """Idempotent: a holding replaced by a re-take of its lease while its SHARD_END write was under
        way is lost twice (by the re-take, then by the write's fenced failure); the second changes nothing."""
        if self.phase is not ShardPhase.LOST:
            self._move(ShardPhase.LOST)

    # -- guards ------------------------------------------------------------------------

    def _move(self, target: ShardPhase) -> None:
        if target not in _NEXT[self.phase]:
            raise self._illegal(f"go to {target.value}")
        self.phase = target

    def _require(self, phase: ShardPhase, what: str) -> None:
        if self.phase is not phase:
            raise self._illegal(what)

    def _require_delivering(self, what: str) -> None:
        if not self.delivering:
            raise self._illegal(what)

    def _illegal(self, what: str) -> RuntimeError:
        """A bug in the consumer, never a condition of the stream or the table: RuntimeError."""
        return RuntimeError(f"shard {self.shard_id}: cannot {what} in state {self.phase.value}")


@dataclass(frozen=True)
class FilteredTail:
    """The last record of a page whose last records the key range left out. Checkpointed only
    while ``after`` (the batch it follows; 0: none) is the last batch acknowledged: never past an
    unacknowledged batch, never behind a later checkpoint."""

    checkpoint: Checkpoint
    after: int


@dataclass(eq=False)
class HeldShard:
    """One holding of a shard as the event loop sees it. ``generation`` tells two holdings apart."""

    lease: Lease
    generation: int
    slots: asyncio.Semaphore
    state: ShardState
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None
    partly_acknowledged: tuple[int, int] | None = None
    """(batch index, row) of the last checkpoint at a record before its batch's last."""
    filtered: FilteredTail | None = None
    """The latest filtered-out position not checkpointed yet (straddled shards only)."""
    filtered_written_at: float = 0.0
    """Event-loop time of the last write of a filtered position (or of the take): they are throttled."""

    @property
    def shard_id(self) -> str:
        return self.lease.shard_id

    def filtered_due(self, now: float, interval_s: float) -> FilteredTail | None:
        """The filtered position to checkpoint now, or None: none pending, too soon after the last
        one, the end seen (SHARD_END covers it), or a batch before it, or a record after it, not in order."""
        tail = self.filtered
        if tail is None or self.state.phase is not ShardPhase.FETCHING:
            return None
        if now - self.filtered_written_at < interval_s or self.state.acknowledged != tail.after:
            return None
        if self.partly_acknowledged is not None and self.partly_acknowledged[0] > tail.after:
            return None
        return tail


class Holdings:
    """The current holding of each shard: the reader's side of the worker's one held set
    (:class:`~kinesis_src.leases.held_leases.HeldLeases`). Holding numbers (``generation``) are
    unique in the process, so a batch of an earlier holding or of another reader is told apart."""

    def __init__(self, held: HeldLeases[HeldShard], metrics: ConsumerMetrics, prefetch: int) -> None:
        self.held = held
        self.metrics = metrics
        self.prefetch = prefetch

    def take(self, lease: Lease) -> HeldShard:
        """A new holding of a held lease; an earlier one of the same shard must have been retired (:meth:`forget`)."""
        state = ShardState(lease.shard_id, owner_switches=lease.owner_switches_since_checkpoint)
        shard = HeldShard(lease, next(_GENERATIONS), asyncio.Semaphore(self.prefetch), state)
        self.held.attach(lease.shard_id, shard)
        self.metrics.leases_taken += 1
        self.metrics.shards[lease.shard_id] = ShardMetrics(lease.shard_id, checkpoint=str(lease.checkpoint))
        return shard

    def get(self, shard_id: str) -> HeldShard | None:
        return self.held.holding(shard_id)

    def of(self, generation: int, shard_id: str) -> HeldShard | None:
        """The holding a batch came from, if it is still the current one."""
        shard = self.held.holding(shard_id)
        return shard if shard is not None and shard.generation == generation else None

    def forget(self, shard: HeldShard) -> None:
        """Remove a holding whose state is terminal, and stop its fetcher."""
        if self.held.detach(shard.shard_id, shard):
            self.metrics.shards.pop(shard.shard_id, None)
        if shard.task is not None and shard.task is not asyncio.current_task():
            shard.task.cancel()

    def all(self) -> list[HeldShard]:
        return self.held.holdings()

    def shard_ids(self) -> list[str]:
        return sorted(shard.shard_id for shard in self.held.holdings())
