"""How fast a lease coordinator detects failures, and what that costs (:class:`LeaseTiming`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

LEASE_ITEM_BYTES = 350  # a lease item with a checkpoint and a throughput estimate, as DynamoDB sizes it
READ_UNIT_BYTES = 4096  # one strongly consistent read unit
REFRESH_BUDGET_RCU = 300.0  # per partition key per second: a tenth of a partition, for periodic re-reads
CHANGE_BUDGET_RCU = 1500.0  # per partition key per second: half a partition, for re-reads after changes
MAX_REFRESH_FACTOR = 10  # the scaled refresh interval is at most this many configured intervals


def fleet_read_units(leases: int, workers: int, partitions: int = 1) -> float:
    """Read units per partition key when every worker reads every lease once."""
    return workers * leases * LEASE_ITEM_BYTES / READ_UNIT_BYTES / max(1, partitions)


@dataclass(frozen=True)
class LeaseTiming:
    """How fast failures are detected, and how much that costs (docs/leases.md, "Timing").
    ``failover_s``: a heartbeat unchanged this long loses its worker's leases. The heartbeat is
    renewed every ``renew_interval_s`` (default failover/3, as the KCL), the table read every
    ``scan_interval_s`` (default renew/2), the lease items at least every
    ``lease_refresh_interval_s`` (0: every scan; scaled with the fleet, :meth:`refresh_s_for`)."""

    failover_s: float = 10.0
    renew_interval_s: float | None = None
    scan_interval_s: float | None = None
    sync_interval_s: float = 60.0
    max_steals_per_cycle: int = 1
    safety_margin_s: float | None = None
    lease_refresh_interval_s: float = 30.0

    def __post_init__(self) -> None:
        if self.failover_s <= 0:
            raise ConfigurationError(f"failover_s must be > 0, got {self.failover_s}")
        if not 0 < self.renew_s <= self.failover_s / 2:
            raise ConfigurationError(
                f"renew_interval_s must be in (0, failover_s/2] so a live worker renews at least twice "
                f"per failover period; got {self.renew_s} with failover_s {self.failover_s}"
            )
        if not 0 < self.scan_s <= self.renew_s:
            raise ConfigurationError(f"scan_interval_s must be in (0, renew_interval_s], got {self.scan_s}")
        if self.lease_refresh_interval_s < 0:
            raise ConfigurationError(f"lease_refresh_interval_s must be >= 0, got {self.lease_refresh_interval_s}")
        if self.max_steals_per_cycle < 0 or self.sync_interval_s <= 0:
            raise ConfigurationError("max_steals_per_cycle must be >= 0 and sync_interval_s > 0")

    def refresh_s_for(self, leases: int, workers: int, partitions: int = 1) -> float:
        """The periodic lease re-read interval, which bounds how late an unannounced change is
        seen: ``lease_refresh_interval_s``, or longer so the fleet's re-reads take at most
        :data:`REFRESH_BUDGET_RCU` per second from each key (at most :data:`MAX_REFRESH_FACTOR`
        times the configured interval)."""
        configured = self.lease_refresh_interval_s
        if configured == 0:
            return 0.0
        needed = fleet_read_units(leases, workers, partitions) / REFRESH_BUDGET_RCU
        return min(max(configured, needed), MAX_REFRESH_FACTOR * configured)

    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        """The least time between two lease reads of one worker, so that the fleet's re-reads
        after announcements take at most :data:`CHANGE_BUDGET_RCU` per second from each key: 0
        within a scan interval, at most ``failover_s`` and the refresh interval. A staler view
        only loses more conditional takes."""
        if self.lease_refresh_interval_s == 0:
            return 0.0
        needed = fleet_read_units(leases, workers, partitions) / CHANGE_BUDGET_RCU
        if needed <= self.scan_s:
            return 0.0  # read at the next scan
        return min(needed, self.failover_s, self.refresh_s_for(leases, workers, partitions))

    @property
    def renew_s(self) -> float:
        return self.failover_s / 3 if self.renew_interval_s is None else self.renew_interval_s

    @property
    def scan_s(self) -> float:
        return self.renew_s / 2 if self.scan_interval_s is None else self.scan_interval_s

    @property
    def margin_s(self) -> float:
        return self.failover_s / 10 if self.safety_margin_s is None else self.safety_margin_s
