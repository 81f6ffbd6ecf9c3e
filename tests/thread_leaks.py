"""Lease threads a test leaves running: each one heartbeats, and retries, for the rest of the session.

A coordinator nobody stopped keeps its renewal thread alive; when its
server is gone it retries against nothing, and a later test that patches
the process-wide retry path (the lease simulation) sees its calls. That
was a CI failure whose cause was three hundred tests earlier. So every test
must end with no lease thread it started still running: the fixture below
fails the test that leaked one, naming the threads.
"""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

LEASE_THREAD_PREFIXES = ("lease-renewal-", "leases-")


def lease_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(LEASE_THREAD_PREFIXES) and t.is_alive()}


@pytest.fixture(autouse=True)
def no_leaked_lease_threads() -> Iterator[None]:
    before = lease_threads()
    yield
    deadline = time.monotonic() + 5.0  # a stop() in progress ends its threads within a cycle
    leaked = lease_threads() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = {t for t in leaked if t.is_alive()}
    if leaked:
        names = ", ".join(sorted(t.name for t in leaked))
        pytest.fail(f"the test left lease threads running (a coordinator nobody stopped): {names}", pytrace=False)
