"""The one retry helper: bounded exponential backoff with jitter (tenacity).

Whether to retry is the error's ``retriable`` flag only (:mod:`kinesis_src.errors`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Awaitable, Callable, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from .errors import ConfigurationError, KinesisSourceError, RetriesExhaustedError
from .retrieval.pacing import doubling_s

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How long a transient failure is retried before it becomes the caller's.

    Defaults sit near the AWS SDKs' standard mode.
    """

    max_attempts: int = 8
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    deadline_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < self.initial_backoff_s:
            raise ConfigurationError(
                "RetryPolicy backoff must satisfy 0 <= initial_backoff_s <= max_backoff_s, got "
                f"{self.initial_backoff_s} and {self.max_backoff_s}"
            )


NO_RETRY = RetryPolicy(max_attempts=1)


class RetryCounts:
    """Retries this process made, by error class; the Prometheus exporter reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_error: dict[str, int] = {}

    def count(self, error: BaseException | None) -> None:
        name = type(error).__name__ if error is not None else "unknown"
        with self._lock:
            self._by_error[name] = self._by_error.get(name, 0) + 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_error)


RETRIES = RetryCounts()


def is_retriable(error: BaseException) -> bool:
    return isinstance(error, KinesisSourceError) and error.retriable


def call_with_retry(
    fn: Callable[[], T],
    what: str,
    policy: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it succeeds, a non-retriable error escapes, or the budget ends.

    ``what`` names the operation and its target in each retry's log line and in the final error.
    """

    started = time.monotonic()
    try:
        return fn()  # most calls succeed at once: no retry machinery for them
    except KinesisSourceError as error:
        if not error.retriable:
            raise
        first = error
    retrying = Retrying(sleep=sleep, **_strategy(what, _rest_of(policy, started)))
    try:
        return retrying(_failed_first(first, fn))
    except KinesisSourceError as error:
        if not error.retriable:
            raise
        raise _exhausted(error, what, retrying.statistics, policy) from error


async def acall_with_retry(
    fn: Callable[[], Awaitable[T]], what: str, policy: RetryPolicy = RetryPolicy()
) -> T:
    """:func:`call_with_retry` for coroutines (the async consumer): same policy, same errors."""
    started = time.monotonic()
    try:
        return await fn()
    except KinesisSourceError as error:
        if not error.retriable:
            raise
        first = error
    retrying = AsyncRetrying(**_strategy(what, _rest_of(policy, started)))
    try:
        return await retrying(_afailed_first(first, fn))
    except KinesisSourceError as error:
        if not error.retriable:
            raise
        raise _exhausted(error, what, retrying.statistics, policy) from error


def _rest_of(policy: RetryPolicy, started: float) -> RetryPolicy:
    """The policy for the attempts after a first one made outside tenacity: the deadline less its time."""
    return replace(policy, deadline_s=max(0.0, policy.deadline_s - (time.monotonic() - started)))


def _failed_first(first: KinesisSourceError, fn: Callable[[], T]) -> Callable[[], T]:
    """``fn``, except that tenacity's first attempt is the one that already failed with ``first``."""
    pending = [first]

    def attempt() -> T:
        if pending:
            raise pending.pop()
        return fn()

    return attempt


def _afailed_first(first: KinesisSourceError, fn: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    pending = [first]

    async def attempt() -> T:
        if pending:
            raise pending.pop()
        return await fn()

    return attempt


def _strategy(what: str, policy: RetryPolicy) -> dict:
    return dict(
        retry=retry_if_exception(is_retriable),
        stop=stop_after_attempt(policy.max_attempts) | stop_after_delay(policy.deadline_s),
        wait=lambda state: backoff_s(policy, state.attempt_number),
        before_sleep=lambda state: _log_retry(state, what),
        reraise=True,
    )


def backoff_s(policy: RetryPolicy, attempt: int) -> float:
    """The wait after failed attempt ``attempt`` (1-based): the initial backoff doubled per attempt, plus up
    to one initial backoff of jitter, at most ``max_backoff_s``. Ours, not tenacity's
    ``wait_exponential_jitter``, whose arguments differ across the tenacity versions setup.cfg allows."""
    doubled = doubling_s(policy.initial_backoff_s, attempt - 1, policy.max_backoff_s)
    return min(policy.max_backoff_s, doubled + random.uniform(0, policy.initial_backoff_s))


def _exhausted(error: KinesisSourceError, what: str, stats: dict, policy: RetryPolicy) -> RetriesExhaustedError:
    attempts = stats.get("attempt_number", policy.max_attempts)
    return RetriesExhaustedError(f"{what} still failing after {attempts} attempt(s): {error}", error)


def _log_retry(state: RetryCallState, what: str) -> None:
    error = state.outcome.exception() if state.outcome else None
    RETRIES.count(error)
    delay = state.next_action.sleep if state.next_action else 0.0
    log.warning(
        "%s failed (attempt %d): %s; retrying in %.2fs", what, state.attempt_number, error, delay
    )
