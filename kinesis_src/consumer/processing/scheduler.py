"""Which record a handler gets next: lanes that run one record at a time, in arrival order.

The ordering mode only picks the lane: (stream, partition key), the holding, or the record. A record
leaves its lane only when done or dropped, so a retry keeps its place. Pure: no I/O, no loop."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Hashable, Iterable

from ...records import Record
from .options import Ordering


class EntryState(str, enum.Enum):
    QUEUED = "queued"  # behind another record of its lane
    READY = "ready"  # head of its lane, waiting for a free slot
    RUNNING = "running"  # in a handler (or its dead-letter write)
    WAITING = "waiting"  # head of its lane, waiting for a retry timer
    DONE = "done"  # accepted or dead-lettered
    DROPPED = "dropped"  # its holding ended before it was done: the next owner redelivers it


HoldingKey = tuple[str, str, int]  # (stream, shard, generation)


@dataclass(eq=False)
class Entry:
    """One record on its way through the handler. ``attempts`` counts this worker's deliveries."""

    holding: HoldingKey
    ordinal: int
    record: Record
    base_count: int = 0  # deliveries by earlier holders since the checkpoint
    lane: Hashable = None
    attempts: int = 0
    state: EntryState = EntryState.QUEUED
    last_error: BaseException | None = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return len(self.record.data)


def lane_of(ordering: Ordering, entry: Entry) -> Hashable:
    if ordering is Ordering.KEY:
        return ("key", entry.record.stream, entry.record.partition_key)
    if ordering is Ordering.SHARD:
        return ("shard", entry.holding)
    return ("record", id(entry))


class Scheduler:
    """Lanes and the ready queue; see the module docstring."""

    def __init__(self, ordering: Ordering) -> None:
        self.ordering = ordering
        self._lanes: dict[Hashable, deque[Entry]] = {}
        self._ready: deque[Entry] = deque()

    def admit(self, entry: Entry) -> None:
        """A new record, after every earlier record of its holding."""
        entry.lane = lane_of(self.ordering, entry)
        lane = self._lanes.get(entry.lane)
        if lane is None:
            self._lanes[entry.lane] = deque([entry])
            self._make_ready(entry)
        else:
            lane.append(entry)
            entry.state = EntryState.QUEUED

    def take(self) -> Entry | None:
        """The oldest ready record, now RUNNING; None if none is ready."""
        if not self._ready:
            return None
        entry = self._ready.popleft()
        self._require(entry, EntryState.READY, "start")
        entry.state = EntryState.RUNNING
        return entry

    def park(self, entry: Entry) -> None:
        """The running head failed or was released: it waits for a timer, still heading its lane."""
        self._require(entry, EntryState.RUNNING, "park")
        entry.state = EntryState.WAITING

    def wake(self, entry: Entry) -> bool:
        """A parked head's timer fired: ready again (False if it was dropped meanwhile)."""
        if entry.state is not EntryState.WAITING:
            return False
        self._make_ready(entry)
        return True

    def finish(self, entry: Entry, state: EntryState = EntryState.DONE) -> None:
        """The running head is done (or abandoned): it leaves its lane, and the next record of the lane may start."""
        self._require(entry, EntryState.RUNNING, "finish")
        entry.state = state
        self._leave(entry)

    def drop(self, holding: HoldingKey) -> list[Entry]:
        """Remove the holding's records that are not running (its lease is gone); returns them.
        Running ones stay at their lanes' heads until they finish, so a later holding's record of
        the same key waits; the dropped leave the ready queue now (their buffer share is freed)."""
        dropped: list[Entry] = []
        for key in list(self._lanes):
            lane = self._lanes[key]
            kept: deque[Entry] = deque()
            for entry in lane:
                if entry.holding == holding and entry.state is not EntryState.RUNNING:
                    entry.state = EntryState.DROPPED
                    dropped.append(entry)
                else:
                    kept.append(entry)
            if not kept:
                del self._lanes[key]
                continue
            self._lanes[key] = kept
            if kept[0].state is EntryState.QUEUED:
                self._make_ready(kept[0])
        if dropped:
            self._ready = deque(e for e in self._ready if e.state is EntryState.READY)
        return dropped

    def entries(self) -> Iterable[Entry]:
        for lane in self._lanes.values():
            yield from lane

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    def _leave(self, entry: Entry) -> None:
        lane = self._lanes.get(entry.lane)
        if lane is None or not lane or lane[0] is not entry:
            raise RuntimeError(f"record {entry.record.sequence_number} is not the head of its lane")
        lane.popleft()
        if lane:
            self._make_ready(lane[0])
        else:
            del self._lanes[entry.lane]

    def _make_ready(self, entry: Entry) -> None:
        entry.state = EntryState.READY
        self._ready.append(entry)

    @staticmethod
    def _require(entry: Entry, state: EntryState, what: str) -> None:
        if entry.state is not state:
            raise RuntimeError(f"cannot {what} record {entry.record.sequence_number} in state {entry.state.value}")
