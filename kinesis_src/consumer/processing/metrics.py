"""What parallel processing reports: counters since ``process()`` began, and gauges of now."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass
class ProcessingMetrics:
    """Counters (since start) and gauges (now) of one ``process()`` run; meanings:
    docs/processing.md, "Metrics". ``buffered_*`` counts records taken and not yet behind the
    checkpoint; ``abandoned``, records dropped unfinished, which the next owner delivers again."""

    in_flight: int = 0
    buffered_records: int = 0
    buffered_bytes: int = 0
    deliveries: int = 0
    redelivered: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    failed: int = 0
    dead_lettered: int = 0
    checkpoints: int = 0
    abandoned: int = 0

    def snapshot(self) -> ProcessingMetrics:
        """A copy to keep: the live object changes on the consumer's event loop."""
        return replace(self)

    def summary(self) -> str:
        return (
            f"processing: {self.in_flight} in flight, {self.buffered_records} buffered "
            f"({self.buffered_bytes} bytes); {self.deliveries} deliveries ({self.redelivered} redelivered): "
            f"{self.accepted} accepted, {self.released} released, {self.rejected} rejected, "
            f"{self.failed} failed, {self.dead_lettered} dead-lettered, {self.abandoned} abandoned; "
            f"{self.checkpoints} checkpoints"
        )
