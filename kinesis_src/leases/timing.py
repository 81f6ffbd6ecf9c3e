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
    """How fast failures are detected, and how much that costs.

    ``failover_s``: a worker whose heartbeat stays unchanged this long (as
    observed by others) loses its leases. ``renew_interval_s`` (default
    failover/3, as the KCL): heartbeat period. ``scan_interval_s`` (default
    renew/2): how often the table is read (one Query) to notice new values,
    stolen leases and free ones. A heartbeat is first seen at most one scan
    after it lands; the first survivor to see it expire takes its fair share
    and the others take the rest at their next scan, so a dead worker's
    leases move within failover + 2 scans (= failover + one renewal at the
    default) of its last heartbeat, plus the takes themselves.
    ``sync_interval_s``: shard discovery by the leader (lowest live worker id).
    ``lease_refresh_interval_s``: a scan reads the heartbeats every time but
    the lease items only when a worker announced an ownership change, and at
    least this often (0: every scan); see :mod:`.view`. The interval used
    grows with leases x workers (:meth:`refresh_s_for`), and so does the
    least time between two lease reads of one worker (:meth:`lease_read_gap_s`).
    """

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
        """The periodic lease re-read interval for this fleet: ``lease_refresh_interval_s``, or longer
        so the fleet's periodic re-reads take at most :data:`REFRESH_BUDGET_RCU` per second from each
        partition key; at most :data:`MAX_REFRESH_FACTOR` times the configured interval.

        Every worker re-reads every lease, so the cost grows with leases x
        workers (docs/leases.md, "Reading the table"). Nothing depends on this
        read for safety; it only bounds how late an unannounced change is seen.
        """
        configured = self.lease_refresh_interval_s
        if configured == 0:
            return 0.0
        needed = fleet_read_units(leases, workers, partitions) / REFRESH_BUDGET_RCU
        return min(max(configured, needed), MAX_REFRESH_FACTOR * configured)

    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        """The least time between two lease reads of one worker, announced changes included: the fleet's
        re-reads after announcements take at most :data:`CHANGE_BUDGET_RCU` per second from each
        partition key (0 while that is within a scan interval; at most ``failover_s``, and no more
        than the refresh interval).

        At a cold start every take is announced and every worker would re-read
        all leases at its next scan. A worker that plans on an older view only
        loses a conditional write more often (takes are conditional).
        """
        if self.lease_refresh_interval_s == 0:
            return 0.0
        needed = fleet_read_units(leases, workers, partitions) / CHANGE_BUDGET_RCU
        if needed <= self.scan_s:
            return 0.0  # read at the next scan, as a small fleet always did
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
