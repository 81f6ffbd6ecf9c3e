"""unit_split.wait_until_unread waits on its injected clock only, and judges the readers from the reading
that found them (a fake clock moved by a fake sleep and by each reading of the heartbeats)."""

from __future__ import annotations

import time

import pytest

from kinesis_src.consumer.unit_split import wait_until_unread
from kinesis_src.in_place import run_sync
from kinesis_src.errors import KinesisSourceError
from kinesis_src.leases.model import WorkerHeartbeat


class FakeTime:
    """A clock moved only by ``sleep`` and by the readings (each takes ``read_s``)."""

    def __init__(self, read_s: float = 0.0) -> None:
        self.now = 0.0
        self.read_s = read_s

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _UnitSet:
    """A unit's lease set read by one worker, 'old', whose heartbeat is ``beats(reading number)``."""

    stream, application, scope = "orders", "app", ""

    def __init__(self, fake: FakeTime, beats: object) -> None:
        self.fake = fake
        self.beats = beats
        self.readings: list[float] = []  # the fake time at which each reading answered

    async def alist_workers(self, dynamodb: object) -> dict[str, WorkerHeartbeat]:
        self.fake.now += self.fake.read_s
        self.readings.append(self.fake.now)
        return {"old": WorkerHeartbeat("old", "s", self.beats(len(self.readings)))}  # type: ignore[operator]


@pytest.fixture
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    def real_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds}s of real time")

    monkeypatch.setattr(time, "sleep", real_sleep)


def test_a_split_that_gives_up_waits_on_the_injected_clock_only(no_real_sleep: None) -> None:
    fake = FakeTime()
    unit = _UnitSet(fake, lambda n: n)  # beats at every reading: never hands the unit over
    started = time.monotonic()
    with pytest.raises(KinesisSourceError, match=r"still read by 'old' after 10 failover times"):
        run_sync(wait_until_unread(unit, None, 0.5, clock=fake, sleep=fake.sleep))  # type: ignore[arg-type]
    assert fake.now >= 10 * 0.5
    assert time.monotonic() - started < 0.5


def test_a_still_reader_is_watched_from_the_reading_that_found_it(no_real_sleep: None) -> None:
    """The reading that named the reader is the watch's first look: the next one comes after a poll's
    sleep, not at once, and the reader is dead one failover time after the first reading."""
    fake = FakeTime(read_s=0.3)
    unit = _UnitSet(fake, lambda n: 7)
    run_sync(wait_until_unread(unit, None, 1.0, clock=fake, sleep=fake.sleep))  # type: ignore[arg-type]
    found = unit.readings[0]
    assert unit.readings[1] - found > fake.read_s + 0.1
    assert found + 1.0 - 1e-9 <= fake.now < found + 1.0 + 0.3 + 0.2  # expired at the first look past it


def test_a_beat_between_the_finding_reading_and_the_next_is_a_sign_of_life(no_real_sleep: None) -> None:
    """'old' beats once right after it was found, then stands still: the move is seen, so it is judged
    dead only one failover time after a later reading, not from the reading that already held the beat."""
    fake = FakeTime(read_s=0.3)
    unit = _UnitSet(fake, lambda n: 1 if n == 1 else 2)
    run_sync(wait_until_unread(unit, None, 1.0, clock=fake, sleep=fake.sleep))  # type: ignore[arg-type]
    assert fake.now >= unit.readings[2] + 1.0 - 1e-9
