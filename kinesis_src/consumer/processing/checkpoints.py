"""When a holding's checkpoint is written: at the done prefix, singly, at most once per interval.

Coalescing spares a DynamoDB write per record; a shard's end, and writes while stopping, go at once.
A longer interval costs redelivery after a crash, never a lost record."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Callable

from ...errors import LeaseLostError
from ..batch import Batch
from .done_tracker import DoneTracker, Target
from .scheduler import HoldingKey


class HoldingPhase(str, enum.Enum):
    ACTIVE = "active"
    CLOSING = "closing"  # stopped delivering: what had not started was dropped; running records finish
    GONE = "gone"  # lease lost or released, or shard ended: its outcomes no longer count


@dataclass(eq=False)
class Holding:
    """One holding of a shard as processing sees it: its done prefix and its checkpoint writes.
    ``base_count``: what earlier holders add to each record's delivery count (the lease's owner
    switches since the checkpoint, less this take)."""

    key: HoldingKey
    base_count: int
    latest: Batch
    tracker: DoneTracker[Batch] = field(default_factory=DoneTracker)
    phase: HoldingPhase = HoldingPhase.ACTIVE
    running: int = 0
    writing: bool = False
    last_write: float = float("-inf")
    timer: asyncio.TimerHandle | None = None

    @property
    def gone(self) -> bool:
        return self.phase is HoldingPhase.GONE

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class CheckpointWriter:
    """Writes ``batch.checkpoint(record)`` at each holding's done prefix, paced as the module says.
    ``on_written(holding, target)`` books a landed write; ``on_lost(holding)`` drops a holding whose
    lease is gone; ``on_failed(error)`` stops processing (e.g. DynamoDB retries exhausted)."""

    def __init__(
        self,
        interval_s: float,
        on_written: Callable[[Holding, Target[Batch]], None],
        on_lost: Callable[[Holding], None],
        on_failed: Callable[[BaseException], None],
    ) -> None:
        self.interval_s = interval_s
        self.on_written = on_written
        self.on_lost = on_lost
        self.on_failed = on_failed
        self.at_once = False  # processing is stopping: no waiting for the interval
        self.writes: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()

    def want(self, holding: Holding, now: bool = False) -> None:
        """The done prefix may have moved: write now, or when the interval allows."""
        if holding.gone or holding.writing:
            return  # a write under way looks again when it lands
        target = holding.tracker.target()
        if target is None:
            return
        due = holding.last_write + self.interval_s
        if now or self.at_once or target.span.batch.ends_shard or self._loop.time() >= due:
            holding.cancel_timer()
            holding.writing = True
            task = asyncio.create_task(self._write(holding, target))
            self.writes.add(task)
            task.add_done_callback(self.writes.discard)
        elif holding.timer is None:
            holding.timer = self._loop.call_later(due - self._loop.time(), self._due, holding)

    def _due(self, holding: Holding) -> None:
        holding.timer = None
        self.want(holding)

    async def _write(self, holding: Holding, target: Target[Batch]) -> None:
        batch = target.span.batch
        try:
            await batch.checkpoint(None if target.whole else batch.records[target.rows - 1])
        except LeaseLostError:
            holding.writing = False
            self.on_lost(holding)
            return
        except Exception as error:  # noqa: BLE001 - handed to the processor, which stops with it
            holding.writing = False
            self.on_failed(error)
            return
        holding.writing = False
        holding.last_write = self._loop.time()
        holding.tracker.written(target)
        self.on_written(holding, target)

    async def settle(self) -> bool:
        """Wait for the writes under way; False if there were none."""
        if not self.writes:
            return False
        await asyncio.gather(*set(self.writes), return_exceptions=True)
        return True
