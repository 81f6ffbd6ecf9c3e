"""The clock that lease expiry and self-doubt are measured on; it counts through host suspends.

CLOCK_BOOTTIME on Linux, else ``time.monotonic`` (docs/leases.md, "Expiry and fencing").
"""


from __future__ import annotations

import time


def _boot_clock_id() -> int | None:
    clock_id = getattr(time, "CLOCK_BOOTTIME", None)
    if clock_id is None:
        return None
    try:
        time.clock_gettime(clock_id)
    except OSError:  # a kernel without it (Linux before 2.6.39)
        return None
    return clock_id


_BOOT_CLOCK_ID = _boot_clock_id()


def since_boot() -> float:
    """Seconds on a clock that never goes back and keeps counting through a host suspend."""
    if _BOOT_CLOCK_ID is not None:
        return time.clock_gettime(_BOOT_CLOCK_ID)
    return time.monotonic()
