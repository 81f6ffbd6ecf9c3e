"""DynamoDB's own time, as a client last heard it: what a ``ttl`` is judged by (docs/leases.md,
"TTL on DynamoDB's clock"). Both DynamoDB clients keep one, fed by every answer's ``Date`` header."""

from __future__ import annotations

import threading
from email.utils import parsedate_to_datetime
from typing import Any, Mapping

from ..clock import since_boot


class ServerClock:
    """The ``Date`` header of the last answer, and when it arrived on this host's monotonic clock."""

    def __init__(self) -> None:
        self._seen: tuple[float, float] | None = None
        self._lock = threading.Lock()

    def note(self, answer: Mapping[str, Any] | None) -> None:
        """Keep the time of a parsed answer (``ResponseMetadata.HTTPHeaders.date``); ignore one without."""
        headers = ((answer or {}).get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        try:
            server_s = parsedate_to_datetime(headers["date"]).timestamp()
        except (KeyError, TypeError, ValueError):  # no Date header (a stub), or an unreadable one
            return
        with self._lock:
            self._seen = (server_s, since_boot())

    def now_s(self) -> float | None:
        """DynamoDB's time now (epoch seconds, +-1 s): the last Date header plus the time elapsed here
        since. None before the first answer."""
        with self._lock:
            seen = self._seen
        return None if seen is None else seen[0] + (since_boot() - seen[1])


def ttl_after(server_s: float | None, now_s: float, lifetime_s: int) -> int:
    """A ``ttl``: ``lifetime_s`` after the later of this host's clock and DynamoDB's, so a host clock
    that is behind cannot get a live item deleted."""
    return max(int(now_s), 0 if server_s is None else int(server_s)) + lifetime_s
