"""The clock that lease expiry and self-doubt are measured on.

``time.monotonic`` (CLOCK_MONOTONIC) stops while the host is suspended (a
laptop lid, a paused VM, a hypervisor snapshot). A worker suspended for longer
than the failover time would wake up believing its last heartbeat was
recent, and keep processing leases that other workers took over meanwhile.
CLOCK_BOOTTIME counts the suspended time too. It exists on Linux; elsewhere
``time.monotonic`` is the best clock available.
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
