"""The retry helper: retries only retriable errors, backs off boundedly, then names the operation."""

from __future__ import annotations

import pytest

from kinesis_src.errors import (
    AccessDeniedError,
    EndpointUnreachableError,
    RetriesExhaustedError,
    ThrottledError,
)
from kinesis_src.retry import RetryPolicy, backoff_s, call_with_retry


class Flaky:
    def __init__(self, failures: list[Exception], result: str = "ok") -> None:
        self.failures = list(failures)
        self.calls = 0
        self.result = result

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.result


def test_retriable_errors_are_retried_until_success() -> None:
    sleeps: list[float] = []
    fn = Flaky([ThrottledError("slow down"), EndpointUnreachableError("refused")])
    assert call_with_retry(fn, "GetRecords on shard s", RetryPolicy(), sleep=sleeps.append) == "ok"
    assert fn.calls == 3
    assert len(sleeps) == 2


def test_non_retriable_errors_escape_at_once() -> None:
    fn = Flaky([AccessDeniedError("denied")])
    with pytest.raises(AccessDeniedError):
        call_with_retry(fn, "x", RetryPolicy(), sleep=lambda s: None)
    assert fn.calls == 1


def test_backoff_is_exponential_jittered_and_capped() -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=10, initial_backoff_s=0.1, max_backoff_s=0.8, deadline_s=1e9)
    fn = Flaky([ThrottledError("t")] * 9)
    call_with_retry(fn, "x", policy, sleep=sleeps.append)
    assert len(sleeps) == 9
    assert all(0 < s <= 0.8 for s in sleeps)
    assert sleeps[0] <= 0.2  # 0.1 * 2**0 plus up to 0.1 jitter
    assert sleeps[-1] == pytest.approx(0.8)  # capped


def test_exhaustion_names_the_operation_and_keeps_the_cause() -> None:
    fn = Flaky([ThrottledError("Rate exceeded for shard")] * 5)
    with pytest.raises(RetriesExhaustedError) as info:
        call_with_retry(fn, "GetRecords on shard shardId-000000000001", RetryPolicy(max_attempts=3), sleep=lambda s: None)
    assert fn.calls == 3
    assert "GetRecords on shard shardId-000000000001" in str(info.value)
    assert "3 attempt" in str(info.value)
    assert isinstance(info.value.last_error, ThrottledError)
    assert not info.value.retriable


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="backoff"):
        RetryPolicy(initial_backoff_s=2, max_backoff_s=1)


def test_backoff_waits_are_bounded_per_attempt_and_never_overflow() -> None:
    policy = RetryPolicy(max_attempts=5, initial_backoff_s=0.1, max_backoff_s=1.0)
    for attempt, floor in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8)]:
        waits = [backoff_s(policy, attempt) for _ in range(200)]
        assert all(floor <= w <= min(1.0, floor + 0.1) for w in waits), (attempt, min(waits), max(waits))
    assert backoff_s(policy, 10_000) == 1.0  # hours of failures: capped, no OverflowError


def test_retrying_works_on_the_oldest_tenacity_the_range_allows() -> None:
    """The strategy is built with arguments every tenacity in setup.cfg's range takes (`make oldest` runs 9.1.2,
    whose ``wait_exponential_jitter`` has no ``multiplier``): a retried call succeeds."""
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 2:
            raise ThrottledError("slow down")
        return "ok"

    assert call_with_retry(flaky, "op", RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002)) == "ok"


def test_a_call_that_succeeds_at_once_builds_no_retry_machinery(monkeypatch) -> None:
    """The common case costs one call: tenacity's Retrying/AsyncRetrying are built only after a failure."""
    import asyncio

    import kinesis_src.retry as retry

    def refuse(*_, **__):
        raise AssertionError("retry machinery built for a call that succeeded at once")

    monkeypatch.setattr(retry, "Retrying", refuse)
    monkeypatch.setattr(retry, "AsyncRetrying", refuse)
    assert call_with_retry(Flaky([]), "x", RetryPolicy()) == "ok"

    async def succeed() -> str:
        return "ok"

    assert asyncio.run(retry.acall_with_retry(succeed, "x", RetryPolicy())) == "ok"


def test_after_a_first_failure_the_attempts_and_the_deadline_count_it(caplog) -> None:
    import asyncio

    from kinesis_src.retry import acall_with_retry

    fn = Flaky([ThrottledError("t")] * 5)
    with pytest.raises(RetriesExhaustedError, match="after 3 attempt"):
        call_with_retry(fn, "x", RetryPolicy(max_attempts=3), sleep=lambda s: None)
    assert fn.calls == 3
    assert "failed (attempt 1)" in caplog.text

    slow = Flaky([ThrottledError("t")] * 5)

    def slow_first() -> str:
        import time as _time
        _time.sleep(0.05)
        return slow()

    with pytest.raises(RetriesExhaustedError, match="after 1 attempt"):  # the first attempt used the deadline
        call_with_retry(slow_first, "x", RetryPolicy(max_attempts=5, deadline_s=0.01), sleep=lambda s: None)
    assert slow.calls == 1

    async_fn = Flaky([ThrottledError("t")])

    async def attempt() -> str:
        return async_fn()

    assert asyncio.run(acall_with_retry(attempt, "x", RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.002))) == "ok"
    assert async_fn.calls == 2
