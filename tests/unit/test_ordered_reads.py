"""Bounded reads of independent shards at the same time, handed out in a fixed order.

:func:`read_in_order` with plain generators (timing controlled by events), then ``drain_stream`` on the
shared fake Kinesis: the same chunks in the same order with 1 or 8 workers, through a split and a merge.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Iterator

import pytest
from fake_kinesis import FakeKinesis
from waiting import wait_for  # tests/waiting.py

from kinesis_src.drain import drain_stream
from kinesis_src.ordered_reads import ShardDone, read_in_order


def chunks_of(counts: dict[str, int], started: dict[str, threading.Event] | None = None):
    def read(sid: str) -> Iterator[str]:
        if started is not None:
            started[sid].set()
        for i in range(counts[sid]):
            yield f"{sid}:{i}"

    return read


def flat(items) -> list[str]:
    return [f"done {i.shard_id}" if isinstance(i, ShardDone) else i for i in items]


def test_chunks_come_shard_after_shard_in_the_given_order_whatever_finishes_first() -> None:
    counts = {"a": 3, "b": 1, "c": 2}
    release_a = threading.Event()

    def read(sid: str) -> Iterator[str]:
        if sid == "a":
            assert release_a.wait(10)  # "a" is the slowest: b and c finish first
        yield from chunks_of(counts)(sid)

    items = read_in_order(["a", "b", "c"], read, workers=3)
    threading.Timer(0.2, release_a.set).start()
    assert flat(items) == ["a:0", "a:1", "a:2", "done a", "b:0", "done b", "c:0", "c:1", "done c"]


def test_shards_are_read_at_the_same_time_up_to_the_worker_count() -> None:
    started = {s: threading.Event() for s in "abcd"}
    gate = threading.Event()

    def read(sid: str) -> Iterator[str]:
        started[sid].set()
        assert gate.wait(10)
        yield sid

    items = read_in_order(list("abcd"), read, workers=3)
    first = threading.Thread(target=lambda: flat(items), daemon=True)
    first.start()
    assert all(started[s].wait(5) for s in "abc")  # three at once, before any chunk was handed out
    time.sleep(0.1)  # (a bounded look: the fourth must NOT have started; nothing to wait on for a non-event)
    assert not started["d"].is_set()
    gate.set()
    first.join(10)
    assert started["d"].is_set()


def test_a_full_buffer_of_later_shards_never_blocks_the_shard_being_handed_out() -> None:
    """buffer=1: b and c may hold one chunk between them, a still gets through all of its 50."""
    items = read_in_order(["a", "b", "c"], chunks_of({"a": 50, "b": 50, "c": 50}), workers=3, buffer=1)
    out = flat(items)
    assert out[:50] == [f"a:{i}" for i in range(50)] and len(out) == 153


def blocked_first(release: threading.Event, counts: dict[str, int], produced: dict[str, int]):
    """"a" yields nothing until released; the others count what they produced."""

    def read(sid: str) -> Iterator[str]:
        if sid == "a":
            assert release.wait(10)
        for i in range(counts[sid]):
            produced[sid] = i + 1
            yield f"{sid}:{i}"

    return read


def test_many_small_chunks_of_later_shards_are_read_while_the_first_shard_waits() -> None:
    """The budget counts what the chunks weigh, not how many there are: small chunks of later
    shards keep coming while the first one is slow (a paced read is many small pages)."""
    release, produced = threading.Event(), {"a": 0, "b": 0, "c": 0}
    items = read_in_order(list("abc"), blocked_first(release, {"a": 1, "b": 200, "c": 200}, produced),
                          workers=3, buffer=10_000, weigh=len)
    done = threading.Event()
    out: list[str] = []
    threading.Thread(target=lambda: (out.extend(flat(items)), done.set()), daemon=True).start()
    wait_for(lambda: produced["b"] == 200 and produced["c"] == 200, 10, "b and c read whole while a waits")
    release.set()
    assert done.wait(10) and len(out) == 404 and out[:2] == ["a:0", "done a"]


def test_readers_stop_at_the_weight_budget() -> None:
    """weigh=len: "b:i" weighs 3. Budget 7: admitted at 0, 3 and 6 (while under 7), the 4th waits."""
    release, produced = threading.Event(), {"a": 0, "b": 0}
    items = read_in_order(["a", "b"], blocked_first(release, {"a": 1, "b": 20}, produced),
                          workers=2, buffer=7, weigh=len)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(flat(items)), daemon=True)
    reader.start()
    wait_for(lambda: produced["b"] == 4, 5, "b read up to its budget")
    time.sleep(0.2)  # (a bounded look: nothing more may be read while the budget is spent)
    assert produced["b"] == 4
    release.set()
    reader.join(10)
    assert len(out) == 23 and produced["b"] == 20



def test_an_error_is_raised_at_its_shards_turn_after_the_chunks_before_it() -> None:
    def read(sid: str) -> Iterator[str]:
        if sid == "b":
            raise RuntimeError("b broke")
        yield from chunks_of({"a": 2, "c": 2})(sid)

    got: list[str] = []
    with pytest.raises(RuntimeError, match="b broke"):
        for item in read_in_order(["a", "b", "c"], read, workers=3):
            got.append(flat([item])[0])
    assert got == ["a:0", "a:1", "done a"]


def test_closing_early_stops_the_readers() -> None:
    produced = {"a": 0, "b": 0}

    def read(sid: str) -> Iterator[str]:
        for i in itertools.count():  # endless: only the close can stop a reader (a loaded machine may let a
            produced[sid] += 1       # bounded one finish before the close lands)
            yield f"{sid}:{i}"

    items = read_in_order(["a", "b"], read, workers=2, buffer=4)
    assert next(items) == "a:0"
    items.close()
    deadline = time.monotonic() + 5
    before = dict(produced)
    while time.monotonic() < deadline:  # both readers stop: their counts stop moving
        time.sleep(0.2)
        if produced == before:
            break
        before = dict(produced)
    assert produced == before and produced["b"] <= 5


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="workers and buffer"):
        list(read_in_order(["a"], chunks_of({"a": 1}), workers=0))


# -- drain_stream on the fake ---------------------------------------------------------------------


def lineage_fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    for round_ in range(3):
        fake.put_records("s", [(f"k{i}", f"k{i}:{round_}".encode()) for i in range(40)])
    _low, high = fake.split_shard("s", "shardId-000000000000", 2**125)
    fake.put_records("s", [(f"k{i}", f"k{i}:3".encode()) for i in range(40)])
    fake.merge_shards("s", high, "shardId-000000000001")
    fake.put_records("s", [(f"k{i}", f"k{i}:4".encode()) for i in range(40)])
    return fake


def read_all(workers: int) -> list[tuple[str, str, bytes]]:
    chunks = drain_stream(lineage_fake(), "s", fetch_interval_s=0, chunk_records=7, workers=workers)  # type: ignore[arg-type]
    return [(c.shard_id, r.sequence_number, r.data) for c in chunks for r in c.records()]


def test_drain_gives_the_same_records_in_the_same_order_with_one_or_many_workers() -> None:
    sequential = read_all(workers=1)
    assert len(sequential) == 200 and len(set(sequential)) == 200
    for _ in range(3):
        assert read_all(workers=8) == sequential
