"""Simulated time: one clock and one queue of timed events (no real time is ever read).

Events at the same instant run in the order they were scheduled (a
sequence number breaks ties), so a run is a pure function of its seed.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Callable


@dataclass(order=True)
class _Event:
    at: float
    seq: int
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class EventQueue:
    """The simulation's clock and agenda: ``now`` moves only when an event is taken."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[_Event] = []
        self._seq = itertools.count()
        self.processed = 0

    def at(self, when: float, action: Callable[[], None]) -> _Event:
        """Run ``action`` at simulated time ``when`` (never before now)."""
        event = _Event(max(when, self.now), next(self._seq), action)
        heapq.heappush(self._heap, event)
        return event

    def after(self, delay_s: float, action: Callable[[], None]) -> _Event:
        return self.at(self.now + delay_s, action)

    @staticmethod
    def cancel(event: _Event) -> None:
        event.cancelled = True

    def run_until(self, end: float, stop: Callable[[], bool] | None = None) -> None:
        """Take events up to ``end`` (inclusive), then set the clock to ``end``; ``stop`` ends early."""
        while self._heap and self._heap[0].at <= end:
            event = heapq.heappop(self._heap)
            if event.cancelled:
                continue
            self.now = event.at
            self.processed += 1
            event.action()
            if stop is not None and stop():
                return
        self.now = max(self.now, end)
