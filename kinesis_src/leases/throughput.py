"""How busy a shard is: measured by its holder, stored on its lease, weighed by the balancer.

A hot shard weighs more than an idle one; the estimate rides on the holder's checkpoints, with no
extra write. Rules: docs/leases.md, "Assignment" ("Weighted by throughput")."""

from __future__ import annotations

import math
import threading
from typing import Iterable

from .model import Lease, Throughput

SHARD_RECORDS_PER_S = 1000.0  # a shard's write limit: 1,000 records/s ...
SHARD_BYTES_PER_S = 1_000_000.0  # ... or 1 MB/s
BASE_WEIGHT = 0.01  # holding a lease costs something even when its shard is idle
ESTIMATE_MAX_AGE_S = 600.0
TIME_CONSTANT_S = 60.0  # the meter's memory
MIN_SPAN_S = 10.0  # no estimate from a shorter observation


def weight(throughput: Throughput) -> float:
    """A shard's load: its share of one shard's write limit, plus the base cost of a lease."""
    share = max(throughput.records_per_s / SHARD_RECORDS_PER_S, throughput.bytes_per_s / SHARD_BYTES_PER_S)
    return BASE_WEIGHT + share


def lease_weights(leases: Iterable[Lease], now_ms: int, max_age_s: float = ESTIMATE_MAX_AGE_S) -> dict[str, float] | None:
    """Shard id -> weight for the balancer; None when no lease carries a current estimate."""
    known: dict[str, float] = {}
    unknown: list[str] = []
    for lease in leases:
        estimate = lease.throughput
        if estimate is not None and now_ms - estimate.measured_ms <= max_age_s * 1000:
            known[lease.shard_id] = weight(estimate)
        else:
            unknown.append(lease.shard_id)
    if not known:
        return None
    mean = sum(known.values()) / len(known)
    return {**known, **{shard_id: mean for shard_id in unknown}}


class RateMeter:
    """Records and bytes per second over roughly the last minute (an exponentially decaying sum),
    corrected for a meter younger than that. Thread-safe: the consumer reports from its loop, and
    checkpoints may read it from other threads."""

    def __init__(self, started: float, tau_s: float = TIME_CONSTANT_S) -> None:
        self.started = started
        self.tau_s = tau_s
        self._at = started
        self._records = 0.0
        self._bytes = 0.0
        self._lock = threading.Lock()

    def add(self, records: int, nbytes: int, now: float) -> None:
        with self._lock:
            self._decay(now)
            self._records += records
            self._bytes += nbytes

    def rate(self, now: float, wall_ms: int) -> Throughput | None:
        """The estimate now; None until the meter has watched for ``MIN_SPAN_S``."""
        with self._lock:
            self._decay(now)
            span = now - self.started
            if span < MIN_SPAN_S:
                return None
            seen = self.tau_s * (1.0 - math.exp(-span / self.tau_s))  # the window a young meter covers
            return Throughput(self._records / seen, self._bytes / seen, wall_ms)

    def _decay(self, now: float) -> None:
        if now > self._at:
            factor = math.exp(-(now - self._at) / self.tau_s)
            self._records *= factor
            self._bytes *= factor
            self._at = now
