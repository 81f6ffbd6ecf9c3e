"""How the coordinator's cycle and its heartbeat run: a step, a wait that can be cut short, again.

:class:`StepLoop` runs one on a thread (``start()``) or as a task on the running loop
(``astart()``); a step is a coroutine, run in place on a thread (:func:`~.in_place.run_sync`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Awaitable, Callable

from ..in_place import run_sync


class Wakeup:
    """``set()`` (from any thread) ends the current or next wait early: on a thread (:meth:`wait`),
    or in a task on the loop given to :meth:`bind` (:meth:`until`)."""

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


class StepLoop:
    """Runs ``step`` again and again until stopped, on a thread (:meth:`start_thread`) or in a task on
    the running loop (:meth:`start_task`). Each step returns the seconds to wait before the next (cut
    short by :meth:`wake`), or None to end the loop; ``failed`` ends it too."""

    def __init__(self, name: str, step: Callable[[], Awaitable[float | None]], failed: Callable[[], bool]) -> None:
        self.name = name
        self._step = step
        self._failed = failed
        self._stop = threading.Event()
        self._wake = Wakeup()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def start_task(self) -> None:
        loop = asyncio.get_running_loop()
        self._wake.bind(loop)
        self._task = loop.create_task(self._arun(), name=self.name)

    def wake(self) -> None:
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set() or self._failed()

    def stop(self, timeout_s: float) -> None:
        """End the loop; wait for its thread (unless called from it)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    async def astop(self, timeout_s: float) -> None:
        """End the loop; wait for its task (unless called from it)."""
        self._stop.set()
        self._wake.set()
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            await asyncio.wait({task}, timeout=timeout_s)

    def running(self) -> bool:
        """Its thread or task is running (a thread other than the caller's)."""
        thread, task = self._thread, self._task
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            return True
        return task is not None and not task.done()

    def _run(self) -> None:
        while not self.stopping:
            wait_s = run_sync(self._step())
            if wait_s is None:
                return
            self._wake.wait(wait_s)

    async def _arun(self) -> None:
        while not self.stopping:
            wait_s = await self._step()
            if wait_s is None:
                return
            await self._wake.until(wait_s)
