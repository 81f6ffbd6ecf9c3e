"""Run a step (a coroutine) to its end on the calling thread, every AWS call made in place.

How synchronous callers run the Consumer's coroutine steps (docs/architecture.md, "One event loop").
"""


from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

_IN_PLACE: contextvars.ContextVar[bool] = contextvars.ContextVar("lease_calls_in_place", default=False)


def run_sync(step: Coroutine[Any, Any, T]) -> T:
    """Run a step to its end on the calling thread, every call made in place."""
    token = _IN_PLACE.set(True)
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        _IN_PLACE.reset(token)
    step.close()
    raise RuntimeError("a step waited on an event loop while run synchronously")


def in_place() -> bool:
    """True while :func:`run_sync` runs a step on this thread."""
    return _IN_PLACE.get()


async def pause(seconds: float, sleep: Callable[[float], object] | None = None) -> None:
    """Wait ``seconds``: with ``sleep`` (a test's clock) by it, in place by blocking, on a loop by awaiting."""
    if sleep is not None:
        sleep(seconds)
    elif in_place():
        time.sleep(seconds)
    else:
        await asyncio.sleep(seconds)
