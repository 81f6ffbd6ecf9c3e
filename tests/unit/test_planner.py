"""Micro-batch planning without I/O: frontier, parent-first admission, no empty batches, caps, cuts."""

from __future__ import annotations

import json
import math

from fake_kinesis import FakeKinesis
from hypothesis import example, given, settings
from hypothesis import strategies as st
from spark_versions import needs_trigger_api  # tests/spark_versions.py

from kinesis_src.positions import Position, PositionKind
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import (
    BatchEnd,
    Frontier,
    ShardStatus,
    admit_ready,
    advance,
    for_trigger,
    idle_shards,
    lineage_rank,
    next_plan,
)
from lineage import ShardGraph

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing as model_listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing as model_listing

TOP = 2**128 - 1
S = "shardId-{:012d}".format


def listing(n: int, lo: int, hi: int, parents: tuple[int, ...] = (), closed: bool = False) -> dict:
    """lineage_model's listing with sequence numbers n+1 (start) and n+2 (end, when closed)."""
    return model_listing(n, lo, hi, parents, ending=str(n + 2) if closed else None, starting=str(n + 1))


def merged_graph() -> ShardGraph:
    """0 and 1 merge into 2."""
    g = ShardGraph()
    half = TOP // 2
    g.update([listing(0, 0, half, closed=True), listing(1, half + 1, TOP, closed=True), listing(2, 0, TOP, (0, 1))])
    return g


def end(seq: str | None, stop: str, shard_end: bool = False, count: int = 1) -> BatchEnd:
    pos = Position.after_sequence(seq) if seq else Position.trim_horizon()
    return BatchEnd(pos, count, shard_end, stop)


def plan_of(batch: int, read: dict[str, Position], carried: dict[str, Position] | None = None, **kw) -> Plan:
    shards = {s: ShardPlan(p, 10) for s, p in read.items()}
    shards.update({s: ShardPlan(p, 0) for s, p in (carried or {}).items()})
    return Plan(run="r", batch=batch, shards=shards, **kw)


def test_merge_child_waits_for_both_parents() -> None:
    g = merged_graph()
    start = admit_ready(Frontier({}, {}, frozenset()), g, preserve_order=True)
    assert sorted(start.positions) == [S(0), S(1)]
    p1 = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon()})
    one_done = advance(p1, {S(0): end("5", "shard_end", shard_end=True), S(1): end("7", "record_limit")})
    assert one_done.drained == {S(0)}
    assert S(2) not in admit_ready(one_done, g, preserve_order=True).positions
    p2 = plan_of(2, {S(1): Position.after_sequence("7")}, drained=frozenset({S(0)}))
    both = advance(p2, {S(1): end("9", "shard_end", shard_end=True)})
    admitted = admit_ready(both, g, preserve_order=True)
    assert admitted.positions == {S(2): Position.trim_horizon()}
    assert admitted.status[S(2)] is ShardStatus.PENDING


def test_opting_out_of_order_admits_children_at_once() -> None:
    g = merged_graph()
    frontier = admit_ready(Frontier({}, {}, frozenset()), g, preserve_order=False)
    assert sorted(frontier.positions) == [S(0), S(1), S(2)]


def test_no_plan_when_every_shard_is_idle_without_data() -> None:
    p1 = plan_of(1, {S(0): Position.trim_horizon()})
    frontier = advance(p1, {S(0): end("5", "caught_up")})
    assert frontier.status[S(0)] is ShardStatus.IDLE
    assert next_plan(p1, frontier, {}, 100, None, None) is None
    assert next_plan(p1, frontier, {S(0): False}, 100, None, None) is None
    nxt = next_plan(p1, frontier, {S(0): True}, 100, None, None)
    assert nxt is not None and nxt.batch == 2 and nxt.read == [S(0)]
    assert nxt.shards[S(0)].start == Position.after_sequence("5")


def test_limited_shards_are_read_again_and_idle_ones_carried() -> None:
    p1 = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon()})
    frontier = advance(p1, {S(0): end("5", "record_limit"), S(1): end("6", "caught_up")})
    nxt = next_plan(p1, frontier, {}, 100, None, None)
    assert nxt.read == [S(0)]
    assert nxt.shards[S(1)] == ShardPlan(Position.after_sequence("6"), 0)  # carried, not read


def test_max_rows_is_split_across_shards() -> None:
    p0 = plan_of(0, {}, {S(i): Position.trim_horizon() for i in range(4)})
    frontier = advance(p0, {})
    nxt = next_plan(p0, frontier, {}, 1000, 10, None)
    assert [nxt.shards[S(i)].max_records for i in range(4)] == [3, 3, 2, 2]  # exactly 10
    assert next_plan(p0, frontier, {}, 2, 10, None).shards[S(0)].max_records == 2


def test_available_now_reads_each_shard_once_up_to_the_cut_then_stops() -> None:
    p1 = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon()})
    idle = advance(p1, {S(0): end("5", "caught_up"), S(1): end("6", "caught_up")})
    cut = "2026-01-01T00:00:00.000000Z"
    first = next_plan(p1, idle, {}, 100, None, cut)
    assert first.read == [S(0), S(1)] and first.cut == cut
    after = advance(first, {S(0): end("8", "end_timestamp"), S(1): end("9", "record_limit")})
    second = next_plan(first, after, {}, 100, None, cut)
    assert second.read == [S(1)] and second.finished == {S(0)}
    done = advance(second, {S(1): end("12", "caught_up")})
    assert next_plan(second, done, {}, 100, None, cut) is None


def test_restart_does_not_go_back_to_skipped_ancestors() -> None:
    g = merged_graph()
    carried = Frontier({S(2): Position.after_sequence("3")}, {S(2): ShardStatus.IDLE}, frozenset())
    assert admit_ready(carried, g, preserve_order=True).positions == {S(2): Position.after_sequence("3")}


def test_offsets_are_stable_json() -> None:
    import json

    p = plan_of(3, {S(1): Position.after_sequence("9"), S(0): Position.trim_horizon()}, drained=frozenset({S(7), S(5)}))
    text = json.dumps(p.to_offset())
    assert json.dumps(Plan.from_offset(json.loads(text)).to_offset()) == text
    assert text.index(S(0)) < text.index(S(1)) and text.index(S(5)) < text.index(S(7))


def test_lineage_rank_puts_parents_before_children() -> None:
    assert lineage_rank(merged_graph()) == {S(0): 1, S(1): 1, S(2): 2}


# -- trigger changes, partial batches, durable ends, exact read limits (issue #9) ------------------


CUT = "2026-01-01T00:00:00.000000Z"


def finished_by_available_now() -> tuple[Plan, Frontier]:
    """Two shards read up to an AvailableNow cut: both FINISHED."""
    first = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon()}, cut=CUT)
    frontier = advance(first, {S(0): end("5", "end_timestamp"), S(1): end("6", "caught_up")})
    assert frontier.status == {S(0): ShardStatus.FINISHED, S(1): ShardStatus.FINISHED}
    return first, frontier


def test_processing_time_after_available_now_probes_and_reads_finished_shards() -> None:
    previous, frontier = finished_by_available_now()
    nxt = next_plan(previous, frontier, {S(0): True, S(1): False}, 100, None, None)
    assert nxt is not None and nxt.read == [S(0)] and nxt.cut is None and nxt.finished == frozenset()
    assert nxt.shards[S(0)].start == Position.after_sequence("5")
    assert nxt.shards[S(1)] == ShardPlan(Position.after_sequence("6"), 0)


def test_finished_shards_are_idle_under_a_trigger_without_cut() -> None:
    previous, frontier = finished_by_available_now()
    assert idle_shards(for_trigger(previous, frontier, None)) == [S(0), S(1)]
    assert for_trigger(previous, frontier, CUT) == frontier  # the same AvailableNow run: done
    later = "2026-02-01T00:00:00.000000Z"
    assert set(for_trigger(previous, frontier, later).status.values()) == {ShardStatus.PENDING}


def two_open_shards() -> list[dict]:
    return [listing(0, 0, TOP // 2), listing(1, TOP // 2 + 1, TOP)]


def stream_reader(shards: list[dict], records: dict[str, list[int]], ends: dict[int, dict[str, BatchEnd]], **options):
    """A stream reader whose driver reads stream "orders" (``shards`` holding ``records``) on the shared
    fake Kinesis, with ``ends`` as the recorded batch ends."""
    # imported here: only the tests that read need pyspark
    from spark_driver_fakes import stream_reader as reader_on

    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=shards)
    for sid, seqs in records.items():
        for q in seqs:
            kinesis.put_record("orders", f"k{q}", b"x", shard_id=sid, sequence_number=str(q))
    return reader_on(kinesis, ends, **options), kinesis


def probed(kinesis: FakeKinesis) -> list[str]:
    """Shards probed for new data (GetRecords(Limit=1) after their position; AT_SEQUENCE_NUMBER
    iterators are the driver's checks for trimmed positions, not probes)."""
    return [c.shard_id for c in kinesis.calls_to("get_shard_iterator") if c.position.kind is not PositionKind.AT_SEQUENCE_NUMBER]


@needs_trigger_api
def test_latest_offset_after_available_now_probes_finished_shards() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    previous, _ = finished_by_available_now()
    ends = {1: {S(0): end("5", "end_timestamp"), S(1): end("6", "caught_up")}}
    records = {S(0): [4, 5], S(1): [6, 7]}  # shard 1 has data after its end, shard 0 has none
    reader, kinesis = stream_reader(two_open_shards(), records, ends)  # a processing-time run: no AvailableNow
    start = previous.to_offset()
    nxt = Plan.from_offset(reader.latestOffset(start, ReadAllAvailable()))
    assert sorted(probed(kinesis)) == [S(0), S(1)]
    assert nxt.batch == 2 and nxt.read == [S(1)] and nxt.shards[S(1)].start == Position.after_sequence("6")


def test_a_shard_without_recorded_end_is_carried_forward_pending() -> None:
    """foreachBatch ran only some partitions (take(1), show(), isEmpty()): the others yielded nothing."""
    p1 = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.after_sequence("3"), S(2): Position.trim_horizon()})
    frontier = advance(p1, {S(0): end("5", "caught_up")})
    assert frontier.positions == {S(0): Position.after_sequence("5"), S(1): Position.after_sequence("3"), S(2): Position.trim_horizon()}
    assert frontier.status == {S(0): ShardStatus.IDLE, S(1): ShardStatus.PENDING, S(2): ShardStatus.PENDING}
    nxt = next_plan(p1, frontier, {}, 100, None, None)
    assert nxt.read == [S(1), S(2)] and nxt.shards[S(1)].start == Position.after_sequence("3")


def test_a_batch_whose_partitions_never_ran_is_carried_forward_whole() -> None:
    """foreachBatch ignored df: no shard recorded an end; the next batch reads the same ranges."""
    p1 = plan_of(1, {S(0): Position.trim_horizon()}, {S(1): Position.after_sequence("9")}, cut=CUT)
    frontier = advance(p1, {})
    assert frontier.status == {S(0): ShardStatus.PENDING, S(1): ShardStatus.IDLE}
    nxt = next_plan(p1, frontier, {}, 100, None, CUT)
    assert nxt.read == [S(0)] and nxt.shards[S(0)].start == Position.trim_horizon()


def all_pending(n: int) -> tuple[Plan, Frontier]:
    p0 = plan_of(0, {}, {S(i): Position.trim_horizon() for i in range(n)})
    return p0, advance(p0, {})


def test_max_records_per_trigger_below_the_shard_count_is_a_hard_cap() -> None:
    p0, frontier = all_pending(50)
    nxt = next_plan(p0, frontier, {}, 1000, 10, None)
    assert sum(sp.max_records for sp in nxt.shards.values()) == 10
    assert len(nxt.read) == 10 and nxt.pending == frozenset(nxt.shards) - set(nxt.read)
    after = advance(nxt, {sid: end("7", "record_limit") for sid in nxt.read})
    assert set(after.status.values()) == {ShardStatus.PENDING}  # the 40 unread still have data: no probe


def test_max_records_per_trigger_is_split_exactly() -> None:
    p0, frontier = all_pending(30)
    nxt = next_plan(p0, frontier, {}, 1000, 100, None)
    quotas = sorted(sp.max_records for sp in nxt.shards.values())
    assert quotas == [3] * 20 + [4] * 10 and sum(quotas) == 100
    capped = next_plan(p0, frontier, {}, 3, 100, None)
    assert {sp.max_records for sp in capped.shards.values()} == {3}


def test_pending_survives_the_offset_and_old_offsets_still_parse() -> None:
    p0, frontier = all_pending(5)
    nxt = next_plan(p0, frontier, {}, 1000, 2, None)
    text = json.dumps(nxt.to_offset())
    back = Plan.from_offset(json.loads(text))
    assert back == nxt and back.pending == frozenset(S(i) for i in range(2, 5))
    assert json.dumps(back.to_offset()) == text
    old = json.loads(text)
    del old["pending"]  # written before "pending" existed
    assert Plan.from_offset(old).pending == frozenset()
    keys = ["version", "run", "batch", "shards", "drained", "finished", "cut", "pending", "stream"]
    assert list(nxt.to_offset()) == keys  # new keys only ever at the end


def test_quota_rotates_by_batch_number() -> None:
    p0, frontier = all_pending(5)
    reads, plan = [], p0
    for _ in range(5):
        plan = next_plan(plan, frontier, {}, 1000, 2, None)
        frontier = advance(plan, {sid: end(str(plan.batch), "record_limit") for sid in plan.read})
        reads.append(plan.read)
    assert reads == [[S(0), S(1)], [S(2), S(3)], [S(0), S(4)], [S(1), S(2)], [S(3), S(4)]]


READ_LIMIT = settings(max_examples=100, deadline=None)  # derandomized by the "ci" profile (tests/conftest.py)


def exact_split(max_rows: int, shards: int, per_shard: int) -> int:
    """The records a batch may plan: max_rows split as evenly as integers allow, each share capped."""
    base, extra = divmod(max_rows, shards)
    return extra * min(per_shard, base + 1) + (shards - extra) * min(per_shard, base)


@READ_LIMIT
@given(
    busy=st.integers(1, 40),
    idle=st.integers(0, 8),
    max_rows=st.integers(1, 90),
    per_shard=st.integers(1, 60),
    idle_first=st.booleans(),
)
@example(busy=50, idle=0, max_rows=10, per_shard=1000, idle_first=False)
@example(busy=30, idle=0, max_rows=100, per_shard=1000, idle_first=False)
@example(busy=7, idle=5, max_rows=3, per_shard=1, idle_first=True)
def test_read_limit_is_a_hard_cap_and_every_pending_shard_progresses(
    busy: int, idle: int, max_rows: int, per_shard: int, idle_first: bool
) -> None:
    """Busy shards always have more data (every read stops on its limit); idle shards never do."""
    shards = [S(i) for i in range(busy + idle)]
    idle_ids = set(shards[:idle] if idle_first else shards[busy:])
    busy_ids = set(shards) - idle_ids
    p1 = plan_of(1, {sid: Position.trim_horizon() for sid in shards})
    plan, frontier = p1, advance(p1, {sid: end("1", "caught_up" if sid in idle_ids else "record_limit") for sid in shards})
    bound = math.ceil(len(shards) / max_rows)
    last_read = {sid: 1 for sid in busy_ids}
    for batch in range(2, 3 * bound + 4):
        nxt = next_plan(plan, frontier, {sid: False for sid in idle_ids}, per_shard, max_rows, None)
        assert nxt is not None and nxt.batch == batch
        planned = sum(nxt.shards[sid].max_records for sid in nxt.read)
        assert planned <= max_rows
        assert planned == exact_split(max_rows, busy, per_shard)
        assert set(nxt.read) <= busy_ids and nxt.pending == busy_ids - set(nxt.read)
        last_read.update((sid, batch) for sid in nxt.read)
        starved = sorted(sid for sid, last in last_read.items() if batch - last >= bound)
        assert not starved, f"batch {batch}: {starved} unread for {bound} batches"
        plan, frontier = nxt, advance(nxt, {sid: end(str(batch), "record_limit") for sid in nxt.read})


@needs_trigger_api
def test_latest_offset_plans_at_most_max_records_per_trigger() -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    quarter = (TOP + 1) // 4
    shards = [listing(i, i * quarter, (i + 1) * quarter - 1) for i in range(4)]
    reader, kinesis = stream_reader(shards, {S(i): [4, 5] for i in range(4)}, {}, maxRecordsPerTrigger="2")
    p0 = plan_of(0, {}, {S(i): Position.trim_horizon() for i in range(4)})
    first = Plan.from_offset(reader.latestOffset(p0.to_offset(), reader.getDefaultReadLimit()))
    assert first.read == [S(0), S(1)] and first.pending == {S(2), S(3)}
    assert sum(sp.max_records for sp in first.shards.values()) == 2
    reader.driver.progress.by_batch[1] = {S(0): end("4", "record_limit"), S(1): end("5", "caught_up")}
    second = Plan.from_offset(reader.latestOffset(first.to_offset(), ReadMaxRows(2)))
    assert second.read == [S(2), S(3)] and second.pending == {S(0)}
    assert probed(kinesis) == [S(1)]  # only the shard that reached the tip; unread ones need no probe


@needs_trigger_api
def test_partitions_rank_the_lineage_again_only_when_it_gained_shards() -> None:
    """partitions() orders parents first on every batch; the lineage walk runs only after a reshard."""
    half = TOP // 2
    shards = [listing(0, 0, TOP, closed=True), listing(1, 0, half, (0,)), listing(2, half + 1, TOP, (0,))]
    reader, _ = stream_reader(shards, {}, {})
    ranks, graph = reader.driver.ranks, reader.driver.discovery.graph
    graph.update(shards)
    for batch in (1, 2, 3):
        p = plan_of(batch, {S(2): Position.trim_horizon(), S(1): Position.trim_horizon()})
        parts = reader.partitions(plan_of(batch - 1, {}).to_offset(), p.to_offset())
        assert [part.slices[0].shard_id for part in parts] == [S(1), S(2)]
    assert ranks.computed == 1
    graph.update([listing(3, 0, half // 2, (1,)), listing(4, half // 2 + 1, half, (1,))])  # shard 1 splits
    p = plan_of(4, {S(3): Position.trim_horizon(), S(2): Position.trim_horizon()})
    parts = reader.partitions(plan_of(3, {}).to_offset(), p.to_offset())
    assert [part.slices[0].shard_id for part in parts] == [S(2), S(3)]  # rank 2 before rank 3
    assert ranks.computed == 2 and ranks.of(graph)[S(3)] == 3


def test_held_shards_are_carried_and_pending_ones_stay_pending() -> None:
    p1 = plan_of(1, {S(0): Position.trim_horizon(), S(1): Position.trim_horizon(), S(2): Position.trim_horizon()})
    frontier = advance(p1, {S(0): end("5", "record_limit"), S(1): end("6", "record_limit"), S(2): end("7", "caught_up")})
    nxt = next_plan(p1, frontier, {S(2): True}, 100, None, None, held={S(1), S(2)})
    assert nxt.read == [S(0)] and nxt.pending == {S(1)} and set(nxt.shards) == {S(0), S(1), S(2)}
    assert next_plan(p1, frontier, {S(2): True}, 100, None, None, held={S(0), S(1), S(2)}) is None


# -- hashKeyRange: only shards overlapping the slice are read ----------------------------------------


def split_then_merge_graph() -> ShardGraph:
    """0 splits at the middle into 1 (low half) and 2 (high half); 2 splits into 3 and 4 at 3/4."""
    half, three_quarters = TOP // 2, TOP // 4 * 3
    graph = ShardGraph()
    graph.update([
        listing(0, 0, TOP, closed=True),
        listing(1, 0, half, (0,)),
        listing(2, half + 1, TOP, (0,), closed=True),
        listing(3, half + 1, three_quarters, (2,)),
        listing(4, three_quarters + 1, TOP, (2,)),
    ])
    return graph


def test_a_key_range_admits_only_overlapping_shards_and_follows_its_keys_through_reshards() -> None:
    from lineage import KeyRange

    graph = split_then_merge_graph()
    low = KeyRange.slice(0, 2)
    frontier = admit_ready(Frontier({}, {}, frozenset()), graph, True, key_range=low)
    assert sorted(frontier.positions) == [S(0)]  # the parent spans every slice: read first
    after = admit_ready(Frontier({}, {}, frozenset({S(0)})), graph, True, key_range=low)
    assert sorted(after.positions) == [S(1)] and S(2) in after.drained  # 2 (high half) is never read
    high = KeyRange.slice(1, 2)
    after = admit_ready(Frontier({}, {}, frozenset({S(0)})), graph, True, key_range=high)
    assert sorted(after.positions) == [S(2)]
    last = KeyRange(TOP // 4 * 3 + 1, TOP)  # only shard 4's keys: 1 and 3 are skipped, 2 is read before 4
    after = admit_ready(Frontier({}, {}, frozenset({S(0), S(2)})), graph, True, key_range=last)
    assert sorted(after.positions) == [S(4)] and {S(1), S(3)} <= after.drained
    assert admit_ready(Frontier({}, {}, frozenset({S(0)})), graph, True) == admit_ready(
        Frontier({}, {}, frozenset({S(0)})), graph, True, key_range=KeyRange.full())


def test_a_key_range_skips_a_whole_chain_of_shards_outside_it_in_one_call() -> None:
    """A skipped shard's children become ready at once; those outside the range are skipped too."""
    from lineage import KeyRange

    half = TOP // 2
    graph = ShardGraph()
    graph.update([
        listing(0, 0, half, closed=True),
        listing(1, half + 1, TOP),
        listing(2, 0, half, (0,), closed=True),
        listing(3, 0, half, (2,)),
    ])
    frontier = admit_ready(Frontier({}, {}, frozenset()), graph, True, key_range=KeyRange(half + 1, TOP))
    assert sorted(frontier.positions) == [S(1)] and frontier.drained == {S(0), S(2), S(3)}


def test_batch_reads_list_only_shards_overlapping_the_range_parents_first() -> None:
    from kinesis_src.spark.planner import shards_in_order
    from lineage import KeyRange

    graph = split_then_merge_graph()
    assert shards_in_order(graph) == [S(0), S(1), S(2), S(3), S(4)]
    assert shards_in_order(graph, KeyRange.slice(0, 2)) == [S(0), S(1)]
    assert shards_in_order(graph, KeyRange.slice(1, 2)) == [S(0), S(2), S(3), S(4)]
    assert shards_in_order(graph, KeyRange(TOP // 2, TOP // 2 + 1)) == [S(0), S(1), S(2), S(3)]  # straddles 1|2


@needs_trigger_api
def test_a_streaming_slice_plans_only_overlapping_shards_and_hands_tasks_its_range() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from lineage import KeyRange

    reader, kinesis = stream_reader(two_open_shards(), {S(0): [1], S(1): [2]}, {}, hashKeyRange="0/2",
                                    initialPosition="trim_horizon")
    initial = reader.initialOffset()
    first = Plan.from_offset(initial)
    assert set(first.shards) == {S(0)} and first.drained == {S(1)}  # shard 1 holds only keys of slice 1/2
    end = reader.latestOffset(initial, ReadAllAvailable())
    parts = reader.partitions(initial, end)
    assert [[s.shard_id for s in p.slices] for p in parts] == [[S(0)]]
    assert all(p.key_range == KeyRange.slice(0, 2) for p in parts)
    assert S(1) not in {c.shard_id for c in kinesis.calls_to("get_shard_iterator")}  # never probed, never read
