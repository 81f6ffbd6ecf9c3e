"""How fast a lease coordinator detects failures, and what that costs (:class:`LeaseTiming`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError


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
    least this often (0: every scan); see :mod:`.view`.
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

    @property
    def renew_s(self) -> float:
        return self.failover_s / 3 if self.renew_interval_s is None else self.renew_interval_s

    @property
    def scan_s(self) -> float:
        return self.renew_s / 2 if self.scan_interval_s is None else self.scan_interval_s

    @property
    def margin_s(self) -> float:
        return self.failover_s / 10 if self.safety_margin_s is None else self.safety_margin_s
