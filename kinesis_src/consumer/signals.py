"""What reaches the consumer's event loop from outside it: SIGTERM, and ``stop()`` from threads.

Everything else of a consumer (its lease coordinators included) runs on the loop; :func:`cancel`
ends one of its tasks."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)


class SigtermHandler:
    """SIGTERM -> ``stop``, unless the application installed its own SIGTERM handler."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self, loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            log.info("consumer %s: SIGTERM already has a handler; call consumer.stop() from it", self.worker_id)
            return
        try:
            loop.add_signal_handler(signal.SIGTERM, stop)
        except (NotImplementedError, RuntimeError):  # Windows, or a loop without signal support
            return
        self._loop = loop

    def remove(self) -> None:
        """Back to the default action, which is what was there before (see above)."""
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGTERM)
            self._loop = None


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel a task and wait for it to finish; never the calling task itself."""
    if task is None or task.done() or task is asyncio.current_task():
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
