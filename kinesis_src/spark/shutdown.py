"""Let the driver-side stream reader clean up when Spark stops a query.

Spark runs a streaming Python data source's driver side in a worker process
of its own (``pyspark.sql.streaming.python_streaming_source_runner``) that
calls ``reader.stop()`` in a ``finally`` block. When the query stops, the
JVM ends that process with SIGTERM, and Python's default for SIGTERM is to
die at once: the ``finally`` never runs, so ``stop()`` was never called.
The query's claim then stayed until its heartbeat went stale, and
``requireConsumerDeregistration`` could not deregister anything.

:func:`stop_on_sigterm` turns the first SIGTERM into ``SystemExit``, which
unwinds through that ``finally``; later ones are ignored so the cleanup is
not cut short. It only acts in the main thread, and never replaces a
handler someone else installed.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)

_installed = False


def stop_on_sigterm() -> bool:
    """Install the handler (once per process); False where it cannot or must not be."""
    global _installed
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False  # somebody else's: theirs decides
    signal.signal(signal.SIGTERM, _exit_once)
    _installed = True
    return True


def _exit_once(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the cleanup
    log.info("stream reader: SIGTERM from Spark; stopping (releasing the claim, deregistering if asked)")
    raise SystemExit(0)
