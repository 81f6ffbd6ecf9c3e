"""How long a shard's fetch loop waits before its next GetRecords: Kinesis' per-shard limits.

Kinesis allows 5 GetRecords calls per second per shard and 2 MB/s of reads
per shard, shared by every application reading the shard. A loop that
ignores them gets ProvisionedThroughputExceeded, which costs a backoff and
slows the other readers too. When a shard is caught up, polling faster than
``idle_interval_s`` only buys latency nobody asked for (the KCL's
``idleTimeBetweenReadsInMillis`` is 1 s for the same reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

CALLS_PER_SECOND = 5
BYTES_PER_SECOND = 2 * 1024 * 1024


@dataclass(frozen=True)
class FetchPacing:
    idle_interval_s: float = 1.0
    min_interval_s: float = 1.0 / CALLS_PER_SECOND
    bytes_per_second: float = BYTES_PER_SECOND

    def __post_init__(self) -> None:
        if self.idle_interval_s < 0 or self.min_interval_s < 0 or self.bytes_per_second <= 0:
            raise ConfigurationError(
                "idle_interval_s and min_interval_s must be >= 0 and bytes_per_second > 0, got "
                f"{self.idle_interval_s}, {self.min_interval_s}, {self.bytes_per_second}"
            )

    def delay(
        self, records: int, byte_count: int, millis_behind_latest: int | None, elapsed_s: float, limit: int = 0
    ) -> float:
        """Seconds to wait before the next call, given what the last one (started ``elapsed_s`` ago) read.

        The interval is measured from the start of the last call: a slow
        response already used part of it. A full page (``records == limit``)
        never counts as caught up, whatever the lag figure says: some
        endpoints (kinesalite) always report 0.
        """
        interval = max(self.min_interval_s, byte_count / self.bytes_per_second)
        if records == 0 or caught_up(records, millis_behind_latest, limit):
            interval = max(interval, self.idle_interval_s)
        return max(0.0, interval - elapsed_s)


def caught_up(records: int, millis_behind_latest: int | None, limit: int) -> bool:
    """Is a page the tip of its shard? It was not full and says it is 0 ms behind, or is empty and says nothing.

    The one caught-up judgement of every reader: bounded reads stop on it
    (``until_caught_up``), fetch loops slow down to the idle interval on it.
    A full page (``records >= limit``) never counts, whatever the lag figure
    says: some endpoints (kinesalite) always report 0. ``records`` counts
    Kinesis records (an aggregate is one), the unit ``limit`` is in.
    """
    if millis_behind_latest is None:
        return records == 0
    return millis_behind_latest == 0 and not (limit > 0 and records >= limit)


def doubling_s(initial_s: float, steps: int, max_s: float) -> float:
    """``initial_s`` doubled ``steps`` times, at most ``max_s``: a backoff before jitter. The exponent
    is capped first, so a failure that repeats for hours (thousands of steps) cannot overflow a float."""
    return min(max_s, initial_s * 2.0 ** min(max(steps, 0), 64))
