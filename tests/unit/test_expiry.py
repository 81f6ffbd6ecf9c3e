"""The one expiry judge: "unchanged for failover_s on my clock" (pure, fake clock)."""

from __future__ import annotations

import math

import pytest

from kinesis_src.errors import ConfigurationError
from kinesis_src.leases.expiry import ExpiryJudge


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_value_unchanged_for_the_failover_time_is_expired(clock: Clock) -> None:
    judge = ExpiryJudge(3.0, clock)
    first = judge.observe("b", ("s1", 4))
    assert first.changed and not first.expired and first.expires_at == 503.0
    clock.now = 502.9
    almost = judge.observe("b", ("s1", 4))
    assert not almost.changed and not almost.expired
    assert almost.unchanged_s == pytest.approx(2.9)
    clock.now = 503.0
    assert judge.observe("b", ("s1", 4)).expired


def test_any_change_restarts_the_wait(clock: Clock) -> None:
    judge = ExpiryJudge(3.0, clock)
    judge.observe("b", ("s1", 4))
    clock.now = 502.0
    moved = judge.observe("b", ("s1", 5))
    assert moved.changed and not moved.expired and moved.expires_at == 505.0
    clock.now = 504.0
    restarted = judge.observe("b", ("s2", 5))  # same counter, new session: a restarted process
    assert restarted.changed and not restarted.expired
    clock.now = 506.9
    assert not judge.observe("b", ("s2", 5)).expired
    clock.now = 507.0
    assert judge.observe("b", ("s2", 5)).expired


def test_wall_clock_values_are_never_compared(clock: Clock) -> None:
    judge = ExpiryJudge(3.0, clock)
    judge.observe("past", ("s", 1))
    judge.observe("future", ("s", 10**12))
    clock.now = 502.0
    assert not judge.observe("past", ("s", 1)).expired and not judge.observe("future", ("s", 10**12)).expired


def test_keys_are_judged_independently_and_forgotten(clock: Clock) -> None:
    judge = ExpiryJudge(3.0, clock)
    assert judge.next_expiry() == math.inf
    judge.observe("a", ("s", 1))
    clock.now = 501.0
    judge.observe("b", ("s", 1))
    assert judge.next_expiry() == 503.0
    judge.retain({"b", "c"})
    assert judge.next_expiry() == 504.0
    judge.forget("b")
    assert judge.next_expiry() == math.inf
    clock.now = 510.0
    assert not judge.observe("b", ("s", 1)).expired  # forgotten: seen afresh


def test_failover_must_be_positive(clock: Clock) -> None:
    with pytest.raises(ConfigurationError, match="failover_s"):
        ExpiryJudge(0.0, clock)


def test_a_scan_observes_every_key_listed_and_forgets_the_rest(clock: Clock) -> None:
    judge = ExpiryJudge(3.0, clock)
    first = judge.observe_all({"a": ("s", 1), "b": ("s", 1)})
    assert all(o.changed and not o.expired for o in first.values())
    clock.now = 503.0
    scan = judge.observe_all({"a": ("s", 1)})  # b is gone from the scan: forgotten
    assert list(scan) == ["a"] and scan["a"].expired
    back = judge.observe_all({"a": ("s", 1), "b": ("s", 1)})
    assert back["b"].changed and not back["b"].expired  # back: a first sight, not a stale one
    assert back["b"].expires_at == 506.0 and judge.next_expiry() == 503.0
