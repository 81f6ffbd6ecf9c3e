"""A thread used as a coroutine: it runs only between the scheduler's resume() and its own suspend().

The coordinator's code is synchronous (a DynamoDB call blocks until it is
answered), so to interleave 100 workers at the granularity of single
requests, each worker's code runs on a thread of its own that hands control
back to the scheduler at every request and every sleep. Exactly one thread
runs at any moment (a baton passed through two semaphores), the scheduler
alone decides which, and nothing waits on real time: the interleaving is
deterministic. (greenlet would do the same without threads; it is not a
dependency of this project.)
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class FiberKilled(BaseException):
    """Raised inside a fiber to unwind it (end of simulation); BaseException so no handler eats it."""


class Fiber:
    """Runs ``body`` on its own thread, one step per :meth:`resume`."""

    def __init__(self, body: Callable[[], None], name: str) -> None:
        self._body = body
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._sent: Any = None
        self._yielded: Any = None
        self._error: BaseException | None = None
        self._kill = False
        self.finished = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def resume(self, value: Any = None) -> Any:
        """Run the fiber until it suspends or ends; returns what it suspended with (None at its end)."""
        if self.finished:
            raise RuntimeError("resume() of a finished fiber")
        self._sent = value
        if not self._started:
            self._started = True
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return None if self.finished else self._yielded

    def suspend(self, request: Any) -> Any:
        """Called on the fiber's thread: hand ``request`` to the scheduler and wait to be resumed."""
        self._yielded = request
        self._back.release()
        self._go.acquire()
        if self._kill:
            raise FiberKilled()
        return self._sent

    def is_current(self) -> bool:
        """True on this fiber's own thread (which of a process's fibers is making a request)."""
        return threading.current_thread() is self._thread

    def kill(self) -> None:
        """Unwind a suspended fiber (its thread ends); a fiber never started just never starts."""
        if self.finished or not self._started:
            self.finished = True
            return
        self._kill = True
        self._go.release()
        self._back.acquire()
        self._error = None

    def _run(self) -> None:
        try:
            self._body()
        except FiberKilled:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, which re-raises it
            self._error = exc
        finally:
            self.finished = True
            self._back.release()
