"""Let the driver-side stream reader clean up when Spark stops a query.

Spark ends the source's runner process with SIGTERM, which skips its ``finally: reader.stop()``;
:func:`stop_on_sigterm` makes the first one a ``SystemExit`` (never over another's handler).
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
