"""A wait that can be cut short: the coordinator's cycle and renewal sleep on one, on a thread or a loop."""

from __future__ import annotations

import asyncio
import threading


class Wakeup:
    """``set()`` (from any thread) ends the current or next wait early.

    A coordinator started with ``start()`` waits on its threads
    (:meth:`wait`); one started with ``astart()`` waits in tasks on its event
    loop (:meth:`until`), after :meth:`bind`.
    """

    def __init__(self) -> None:
        self._flag = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._event = loop, asyncio.Event()

    def set(self) -> None:
        self._flag.set()
        loop, event = self._loop, self._event
        if loop is None or event is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            event.set()
        else:
            loop.call_soon_threadsafe(event.set)

    def wait(self, timeout_s: float) -> None:
        self._flag.wait(timeout_s)
        self._flag.clear()

    async def until(self, timeout_s: float) -> None:
        event = self._event
        assert event is not None, "bind() the wakeup to its loop first"
        if not self._flag.is_set():
            try:
                async with asyncio.timeout(timeout_s):
                    await event.wait()
            except TimeoutError:
                pass
        self._flag.clear()
        event.clear()
