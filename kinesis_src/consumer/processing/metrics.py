"""What parallel processing reports: counters since ``process()`` began, and gauges of now."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass
class ProcessingMetrics:
    """Counters (since start) and gauges (now) of one ``process()`` run.

    * ``in_flight``: handler calls running now; ``buffered_records`` /
      ``buffered_bytes``: records held in memory now (waiting, running,
      waiting for a retry, or done but not yet below the checkpoint).
    * ``deliveries``: handler calls; ``redelivered``: those with a
      ``delivery_count`` above 1 (a local retry or release, or an earlier
      holder of the lease).
    * ``accepted``, ``released``, ``rejected``: handler outcomes;
      ``failed``: attempts that raised any other exception.
    * ``dead_lettered``: records handed to the dead letter (rejected, or
      out of attempts); ``checkpoints``: checkpoint writes made;
      ``abandoned``: records dropped unfinished because their lease was
      lost or released, or the consumer stopped: the next owner delivers
      them again.
    """

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
