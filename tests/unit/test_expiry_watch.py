"""ExpiryJudge.watch: one look of a watch that ends when a heartbeat moves or all of them expire (pure, fake clock)."""

from __future__ import annotations

from kinesis_src.leases.expiry import ExpiryJudge


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_after_the_seeding_look_a_move_names_the_key_and_stillness_counts_down_to_expiry() -> None:
    clock = Clock()
    judge = ExpiryJudge(2.0, clock)
    seed = judge.watch({"a": ("s", 1), "b": ("s", 7)})
    assert set(seed.moved) == {"a", "b"} and not seed.expired and seed.wait_s == 2.0  # first sight: a change
    clock.now = 101.5
    still = judge.watch({"a": ("s", 1), "b": ("s", 7)})
    assert still.moved == () and not still.expired and still.wait_s == 0.5
    moved = judge.watch({"a": ("s", 2), "b": ("s", 7)})
    assert moved.moved == ("a",) and not moved.expired and moved.wait_s == 0.5  # b still expires first
    clock.now = 102.0
    assert judge.watch({"a": ("s", 2), "b": ("s", 7)}).expired is False  # a restarted at 101.5
    clock.now = 103.5
    done = judge.watch({"a": ("s", 2), "b": ("s", 7)})
    assert done.moved == () and done.expired and done.wait_s == 0.0


def test_a_key_gone_is_no_longer_waited_for_and_one_back_has_moved() -> None:
    clock = Clock()
    judge = ExpiryJudge(2.0, clock)
    judge.watch({"a": ("s", 1), "b": ("s", 7)})
    clock.now = 101.0
    gone = judge.watch({"b": ("s", 7)})
    assert gone.moved == () and not gone.expired
    back = judge.watch({"a": ("s", 1), "b": ("s", 7)})
    assert back.moved == ("a",)  # the same value as before it went: seen afresh, alive
    assert judge.watch({}).expired  # none left: nothing to wait for
