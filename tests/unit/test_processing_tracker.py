"""The done tracker (kinesis_src/consumer/processing/done_tracker.py): where a holding may checkpoint.

The property that matters: whatever order records finish in, a checkpoint
never covers a record that is not done, and once all are done it covers
them all (the empty batch that ends a shard included).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_src.consumer.processing.done_tracker import DoneTracker, Target


def covered(target: Target[str]) -> int:
    """How many ordinals a checkpoint at ``target`` acknowledges."""
    return target.span.start + target.rows


@st.composite
def batches_and_order(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    sizes = draw(st.lists(st.integers(0, 5), min_size=1, max_size=8))
    order = draw(st.permutations(range(sum(sizes))))
    return sizes, list(order)


@given(batches_and_order(), st.data())
@example(([2, 0, 3, 0], [4, 0, 3, 1, 2]), None)
@example(([0], []), None)
def test_random_completion_orders_never_checkpoint_past_an_undone_record(case, data) -> None:
    sizes, order = case
    tracker: DoneTracker[str] = DoneTracker()
    for i, size in enumerate(sizes):
        tracker.add(f"batch-{i}", size, size * 10)
    done: set[int] = set()
    written = 0
    for ordinal in order:
        tracker.complete(ordinal)
        done.add(ordinal)
        target = tracker.target()
        if target is None:
            continue
        upto = covered(target)
        assert all(o in done for o in range(upto)), f"checkpoint at {upto} covers an undone record"
        assert upto >= written, "a checkpoint stepped back"
        if data is None or data.draw(st.booleans(), label="write now"):
            tracker.written(target)
            written = upto
            tracker.let_go()
    final = tracker.target()
    if final is not None:
        tracker.written(final)
    assert tracker.all_done
    # Everything done: the last checkpoint is at the last batch, all of it (an empty last batch included).
    assert tracker.checkpointed == (len(sizes) - 1, sizes[-1])


def test_an_undone_record_holds_the_checkpoint_back_and_its_completion_releases_everything_after_it() -> None:
    tracker: DoneTracker[str] = DoneTracker()
    tracker.add("a", 3, 30)
    tracker.add("b", 2, 20)
    for ordinal in (1, 2, 3, 4):
        assert tracker.complete(ordinal) is False  # 0 is still running
    assert tracker.target() is None and tracker.is_head(0)
    assert tracker.complete(0) is True
    target = tracker.target()
    assert (target.span.batch, target.rows, target.whole) == ("b", 2, True)
    tracker.written(target)
    assert [s.batch for s in tracker.let_go()] == ["a", "b"]  # covered by the checkpoint: their memory goes
    assert tracker.target() is None


def test_a_partial_checkpoint_names_the_last_done_row_of_the_batch() -> None:
    tracker: DoneTracker[str] = DoneTracker()
    tracker.add("a", 4, 40)
    tracker.complete(0)
    tracker.complete(1)
    tracker.complete(3)
    target = tracker.target()
    assert (target.span.batch, target.rows, target.whole) == ("a", 2, False)


def test_the_empty_batch_that_ends_a_shard_is_the_target_once_everything_before_it_is_done() -> None:
    tracker: DoneTracker[str] = DoneTracker()
    tracker.add("last records", 2, 20)
    tracker.add("end", 0, 0)
    tracker.complete(0)
    assert tracker.target().span.batch == "last records"
    tracker.complete(1)
    target = tracker.target()
    assert (target.span.batch, target.whole) == ("end", True)


def test_completing_twice_or_an_unknown_record_is_refused_or_ignored() -> None:
    tracker: DoneTracker[str] = DoneTracker()
    tracker.add("a", 2, 20)
    assert tracker.complete(0) is True
    assert tracker.complete(0) is False
    try:
        tracker.complete(2)
    except ValueError as exc:
        assert "never admitted" in str(exc)
    else:
        raise AssertionError("an ordinal never admitted was accepted")
