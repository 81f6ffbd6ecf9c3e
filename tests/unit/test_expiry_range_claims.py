"""Key-range claims judged by the one expiry judge: watches wait on the injected clock (range_claims)."""

from __future__ import annotations

import pytest

from kinesis_src.consumer.range_claims import observe_live


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.naps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds


def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    def real(seconds: float) -> None:
        raise AssertionError(f"slept {seconds}s of real time under an injected clock")

    monkeypatch.setattr(time, "sleep", real)


def test_a_watch_waits_on_the_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    no_real_sleep(monkeypatch)
    fake = FakeTime()
    still = {"a": ("s1", 1)}
    assert observe_live({"a": "A"}, lambda: still, 1.0, fake, sleep=fake.sleep) == []
    assert fake.now == pytest.approx(1.0)  # judged dead exactly at the failover time on the fake clock
    assert max(fake.naps) <= 0.2  # polled every poll_s, however long the failover time
