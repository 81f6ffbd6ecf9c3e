"""The one way tests wait: poll a condition until it holds or a deadline passes (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(condition: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition", poll_s: float = 0.02) -> Any:
    """Return the condition's first truthy value; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.1f}s waiting for {what}")
        time.sleep(poll_s)
