"""How long a shard's fetch loop waits before its next GetRecords: Kinesis' per-shard limits.

5 calls/s and 2 MB/s per shard, shared by every application; past them, every reader is throttled.
A caught-up shard waits ``idle_interval_s``: polling faster buys latency nobody asked for."""

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
        """Seconds to wait before the next call, given what the last one (started ``elapsed_s`` ago)
        read; an empty or caught-up page waits at least ``idle_interval_s``."""
        interval = max(self.min_interval_s, byte_count / self.bytes_per_second)
        if records == 0 or caught_up(records, millis_behind_latest, limit):
            interval = max(interval, self.idle_interval_s)
        return max(0.0, interval - elapsed_s)


def caught_up(records: int, millis_behind_latest: int | None, limit: int) -> bool:
    """Is a page the tip of its shard: not full and 0 ms behind, or empty with no lag figure? Every
    reader's one judgement. A full page (``records >= limit``, in Kinesis records) never counts:
    some endpoints (kinesalite) always report 0."""
    if millis_behind_latest is None:
        return records == 0
    return millis_behind_latest == 0 and not (limit > 0 and records >= limit)


def doubling_s(initial_s: float, steps: int, max_s: float) -> float:
    """``initial_s`` doubled ``steps`` times, at most ``max_s``: a backoff before jitter. The exponent
    is capped first, so a failure that repeats for hours (thousands of steps) cannot overflow a float."""
    return min(max_s, initial_s * 2.0 ** min(max(steps, 0), 64))
