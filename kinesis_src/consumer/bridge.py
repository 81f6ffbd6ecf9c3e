"""What reaches the consumer's event loop from elsewhere: the lease coordinator's thread, and SIGTERM.

The coordinator calls its listener from its own thread; every call hops
onto the loop, where all of the consumer's state lives, so that state needs
no locks. ``before_release`` is the one call that waits for the loop's
answer: the release must follow the application's last checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any, Awaitable, Callable

from ..leases.model import Lease

log = logging.getLogger(__name__)


class LoopListener:
    """The coordinator's listener (:class:`~kinesis_src.leases.coordinator.LeaseListener`) for a loop."""

    def __init__(
        self,
        loop: Callable[[], asyncio.AbstractEventLoop | None],
        on_acquired: Callable[[Lease], None],
        on_lost: Callable[[Lease, str], None],
        prepare_release: Callable[[str], Awaitable[None]],
        release_wait_s: Callable[[], float],
    ) -> None:
        self._loop = loop
        self._on_acquired = on_acquired
        self._on_lost = on_lost
        self._prepare_release = prepare_release
        self._release_wait_s = release_wait_s

    def on_acquired(self, lease: Lease) -> None:
        self._post(self._on_acquired, lease)

    def on_lost(self, lease: Lease, reason: str) -> None:
        self._post(self._on_lost, lease, reason)

    def before_release(self, lease: Lease) -> None:
        loop = self._loop()
        if loop is None or loop.is_closed() or on_loop(loop):
            return
        future = asyncio.run_coroutine_threadsafe(self._prepare_release(lease.shard_id), loop)  # type: ignore[arg-type]
        future.result(self._release_wait_s() + 5.0)

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop()
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)


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
