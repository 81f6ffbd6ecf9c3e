"""The driver's idle-shard probes: concurrent, iterators reused, per-shard pacing, bounded per trigger."""

from __future__ import annotations

import threading

from fake_kinesis import FakeKinesis

from kinesis_src.positions import Position
from kinesis_src.spark.probes import IdleProber

STREAM = "orders"


class FakeClock:
    """A clock the test moves; ``tick`` is added after every reading (time passing inside a round)."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 100.0
        self.tick = tick
        self.slept: list[float] = []

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def stream(shards: int) -> tuple[FakeKinesis, list[str], dict[str, Position]]:
    """``shards`` shards holding one record each; positions after it (idle at the tip)."""
    kinesis = FakeKinesis()
    kinesis.create_stream(STREAM, shards)
    ids = [s["ShardId"] for s in kinesis.list_shards(STREAM)]
    positions = {}
    for sid in ids:
        kinesis.put_record(STREAM, "k", b"x", shard_id=sid)
        positions[sid] = Position.after_sequence(kinesis.shard(STREAM, sid).records[-1].sequence_number)
    return kinesis, ids, positions


def prober(kinesis: FakeKinesis, clock: FakeClock, interval_s: float = 1.0, **kw) -> IdleProber:
    return IdleProber(kinesis, STREAM, interval_s, clock=clock, sleep=clock.sleep, **kw)


class MeetingKinesis(FakeKinesis):
    """GetRecords waits until ``n`` calls are in flight at once: a sequential prober breaks the barrier."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(n, timeout=10)
        self.lock = threading.Lock()

    def get_records(self, iterator, limit, shard_id, stream):
        self.barrier.wait()
        with self.lock:
            return super().get_records(iterator, limit, shard_id, stream)


def test_a_round_probes_idle_shards_at_the_same_time() -> None:
    kinesis = MeetingKinesis(8)
    kinesis.create_stream(STREAM, 8)
    ids = [s["ShardId"] for s in kinesis.list_shards(STREAM)]
    clock = FakeClock()
    found = prober(kinesis, clock, workers=8).probe(ids, {sid: Position.trim_horizon() for sid in ids})
    assert found.keys() == set(ids) and not any(r.has_data for r in found.values())


def test_an_empty_probe_keeps_its_iterator_for_the_next_one() -> None:
    kinesis, ids, positions = stream(4)
    clock = FakeClock()
    p = prober(kinesis, clock)
    assert not any(r.has_data for r in p.probe(ids, positions).values())
    clock.now += 1.0
    kinesis.put_record(STREAM, "k", b"new", shard_id=ids[2])
    found = p.probe(ids, positions)
    assert {sid for sid, r in found.items() if r.has_data} == {ids[2]}
    assert kinesis.count("get_shard_iterator") == 4  # one per position, not one per probe
    assert kinesis.count("get_records") == 8


def test_a_shard_is_probed_at_most_once_per_interval_and_never_faster_than_kinesis_allows() -> None:
    kinesis, ids, positions = stream(2)
    clock = FakeClock()
    p = prober(kinesis, clock, interval_s=0.1)  # idlePollIntervalMs allows 100 ms; Kinesis allows 5 calls/s
    p.probe(ids, positions)
    clock.now += 0.15
    assert p.probe(ids, positions) == {}
    clock.now += 0.05
    assert set(p.probe(ids, positions)) == set(ids)
    moved = {**positions, ids[0]: Position.after_sequence("999999")}
    assert set(p.probe(ids, moved)) == {ids[0]}  # a new position is a new question
    assert kinesis.count("get_records") == 5


def test_a_shard_a_task_just_read_waits_200_ms_after_its_end_was_learned() -> None:
    kinesis, ids, positions = stream(2)
    clock = FakeClock()
    p = prober(kinesis, clock)
    p.read_by_task([ids[0]])
    clock.now += 0.05
    assert set(p.probe(ids, positions)) == set(ids)
    assert len(clock.slept) == 1 and abs(clock.slept[0] - 0.15) < 1e-9
    clock.now += 5
    p.probe(ids, positions)
    assert len(clock.slept) == 1  # long ago: no wait


def test_a_round_over_budget_leaves_the_rest_for_the_next_trigger_least_recently_probed_first() -> None:
    kinesis, ids, positions = stream(6)
    clock = FakeClock(tick=0.1)  # every clock reading is 100 ms later: the budget runs out mid-round
    p = prober(kinesis, clock, interval_s=0.2, workers=2, budget_s=0.35)
    first = p.probe(ids, positions)
    assert 2 <= len(first) < len(ids)  # the first `workers` probes always start
    second = p.probe(ids, positions)
    left = [sid for sid in ids if sid not in first]
    assert list(second)[: len(left)] == left[: len(second)]  # the ones left over go first
    seen = set(first) | set(second)
    while seen != set(ids):
        seen |= set(p.probe(ids, positions))
    assert all(kinesis.count("get_records", sid) >= 1 for sid in ids)


def test_data_drops_the_reader_and_a_gone_shard_is_reported() -> None:
    from kinesis_src.errors import ShardNotFoundError

    kinesis, ids, positions = stream(2)
    clock = FakeClock()
    p = prober(kinesis, clock)
    kinesis.put_record(STREAM, "k", b"new", shard_id=ids[0])
    kinesis.inject("get_shard_iterator", ShardNotFoundError("gone"), shard_id=ids[1])
    found = p.probe(ids, positions)
    assert found[ids[0]].has_data and not found[ids[0]].gone
    assert found[ids[1]].gone and found[ids[1]].has_data  # a task meets it and applies failOnDataLoss
    clock.now += 1.0
    p.probe(ids, positions)
    assert kinesis.count("get_shard_iterator", ids[0]) == 2  # data found: the next probe starts afresh


def test_an_expired_iterator_is_replaced_within_the_probe() -> None:
    kinesis, ids, positions = stream(1)
    clock = FakeClock()
    p = prober(kinesis, clock)
    p.probe(ids, positions)
    kinesis.expire_iterators()
    clock.now += 1.0
    kinesis.put_record(STREAM, "k", b"new", shard_id=ids[0])
    assert p.probe(ids, positions)[ids[0]].has_data
    assert kinesis.count("get_shard_iterator") == 2 and kinesis.count("get_records") == 3


def test_one_round_shares_its_budget_between_checks_and_probes() -> None:
    kinesis, ids, positions = stream(6)
    clock = FakeClock()
    p = prober(kinesis, clock, workers=2, budget_s=0.3)
    p.new_round()
    clock.now += 0.5  # the listing and the checks spent the budget
    assert len(p.probe(ids, positions)) == 2  # only the first `workers` start: progress, not a stall
    clock.now += 1.0
    assert p.probe(ids, positions) == {}  # ...once per round: a round's later calls start nothing late
    p.new_round()
    assert len(p.probe(ids, positions)) == 6  # a new trigger: every shard is due again
