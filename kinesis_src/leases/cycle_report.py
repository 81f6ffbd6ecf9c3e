"""What one coordinator cycle did (:class:`CycleReport`), and which failures are worth another cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import KinesisSourceError, LineageListingError, RetriesExhaustedError
from .model import HeartbeatStatus


@dataclass
class CycleReport:
    """What one :meth:`LeaseCoordinator.run_once` did; the worker loop logs it, tests read it."""

    heartbeat: HeartbeatStatus | None = None
    live_workers: tuple[str, ...] = ()
    declared_dead: list[str] = field(default_factory=list)
    acquired: list[str] = field(default_factory=list)
    stolen: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)  # leases this worker asked their holders to release
    lost_races: list[str] = field(default_factory=list)  # takes and steals whose condition failed
    released: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    synced: object | None = None
    held: tuple[str, ...] = ()
    read_leases: bool = False  # the lease items were read, not served from the cache (see .view)
    announced: bool = False  # a heartbeat announced this worker's ownership changes


def transient(error: BaseException) -> bool:
    """Errors worth another cycle: the retry budget ran out on something retriable, or a
    listing caught mid-reshard. Corrupt items, missing tables, permissions: fatal."""
    if isinstance(error, RetriesExhaustedError):
        return True
    if isinstance(error, LineageListingError):
        return True
    return isinstance(error, KinesisSourceError) and error.retriable

