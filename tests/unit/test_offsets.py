"""Offsets at scale: large plans are stored in the lease table and named by digest; old offsets still restart."""

from __future__ import annotations

import json
import random

import pytest
from fake_kinesis import FakeKinesis
from moto import mock_aws

# The 4.2+ stream reader (admission control, AvailableNow); PySpark 4.0/4.1 run the legacy reader
# (tests/unit/test_spark_compat.py) and `make oldest` runs this file on 4.0, where it skips.
pytest.importorskip("pyspark.sql.streaming.datasource", reason="needs PySpark 4.2+ (the 4.2 stream reader)")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_driver_fakes import NoClaim, RecordedEnds, stream_reader

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ConfigurationError
from kinesis_src.leases.table import LeaseTable
from kinesis_src.positions import Position
from kinesis_src.spark.driver import StreamDriver
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.options import parse_options
from kinesis_src.spark.plan_store import PlanBook, PlanStore
from kinesis_src.spark.planner import (
    BatchEnd,
    admit_ready,
    advance,
    compact_drained,
    with_implied_drained,
)
from kinesis_src.spark.stream import KinesisStreamReader
from lineage import ShardGraph

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing as model_listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing as model_listing

TOP = 2**128 - 1
S = "shardId-{:012d}".format
KIB = 1024


def sequence(rng: random.Random) -> str:
    """A Kinesis-sized sequence number: 56 digits."""
    return str(rng.randrange(10**55, 10**56))


def big_plan(open_shards: int = 1000, ancestors: int = 5000, batch: int = 7) -> Plan:
    rng = random.Random(12)
    shards = {S(ancestors + i): ShardPlan(Position.after_sequence(sequence(rng)), 1000 * (i % 2)) for i in range(open_shards)}
    return Plan(run="r" * 32, batch=batch, shards=shards, drained=frozenset(S(i) for i in range(ancestors)))


@pytest.fixture
def store(dummy_credentials: None):
    with mock_aws():
        leases = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "offsets-unit", "app", "orders")
        leases.ensure_table()
        yield PlanStore.of(leases)


def test_a_plan_of_1000_open_shards_and_5000_ancestors_fits_a_small_offset_and_reads_back(store: PlanStore) -> None:
    plan = big_plan()
    assert len(json.dumps(plan.to_offset())) > 200 * KIB  # what the offset log held before
    offset = PlanBook(store).offset_of(plan)
    assert len(json.dumps(offset)) <= 16 * KIB
    assert list(offset) == ["version", "run", "batch", "plan", "shards", "stream"]
    restarted = PlanBook(store)  # a new driver process: nothing cached
    assert restarted.plan_of(json.loads(json.dumps(offset))) == plan


def test_equal_plans_give_equal_offsets_and_small_plans_stay_inline(store: PlanStore) -> None:
    book = PlanBook(store)
    assert json.dumps(book.offset_of(big_plan())) == json.dumps(PlanBook(store).offset_of(big_plan()))
    small = big_plan(open_shards=3, ancestors=2)
    assert book.offset_of(small) == small.to_offset()  # readable in the offset log, no item written
    assert book.plan_of(small.to_offset()) == small


def test_a_plan_larger_than_an_item_is_stored_in_parts(store: PlanStore) -> None:
    store.part_bytes = 1000
    plan = big_plan(open_shards=200, ancestors=100)
    offset = PlanBook(store).offset_of(plan)
    pk = store.partition(plan.run, plan.batch)
    assert len(store.dynamodb.query(store.table_name, "pk", pk)) > 5
    assert PlanBook(store).plan_of(offset) == plan


def test_a_missing_stored_plan_fails_with_the_way_out(store: PlanStore) -> None:
    plan = big_plan(open_shards=200, ancestors=100)
    offset = PlanBook(store).offset_of(plan)
    store.purge_batch(plan.run, plan.batch)
    with pytest.raises(ConfigurationError, match=r"missing or incomplete.*offsets-unit.*new checkpointLocation"):
        PlanBook(store).plan_of(offset)


def test_committing_a_stored_plan_purges_the_ones_before_it(store: PlanStore) -> None:
    book = PlanBook(store)
    offsets = [book.offset_of(big_plan(open_shards=200, ancestors=100, batch=b)) for b in (5, 6, 7)]
    book.forget_before(offsets[1])
    run = offsets[0]["run"]
    assert [bool(store.dynamodb.query(store.table_name, "pk", store.partition(run, b))) for b in (5, 6, 7)] == [
        False, True, True
    ]
    assert PlanBook(store).plan_of(offsets[2]).batch == 7


# -- through the stream reader, across a restart ------------------------------------------------------


def reader_on(kinesis: FakeKinesis, ends: dict, store: PlanStore | None) -> KinesisStreamReader:
    return stream_reader(kinesis, ends, plans=store)


def flat_stream(n: int) -> FakeKinesis:
    width = (TOP + 1) // n
    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=[model_listing(i, i * width, TOP if i == n - 1 else (i + 1) * width - 1)
                                             for i in range(n)])
    for i in range(n):
        kinesis.put_record("orders", "k", b"x", shard_id=S(i), sequence_number=str(10 + i))
    return kinesis


def test_a_restart_replays_a_stored_plan_with_the_same_partitions(store: PlanStore) -> None:
    n = 60
    kinesis = flat_stream(n)
    p0 = Plan("r", 0, {S(i): ShardPlan(Position.trim_horizon(), 0) for i in range(n)})
    reader = reader_on(kinesis, {}, store)
    reader.driver.plans.inline_max = 200  # 60 shards: stored, not inline
    end = reader.latestOffset(p0.to_offset(), ReadAllAvailable())
    assert "plan" in end and "shards" in end and len(json.dumps(end)) < 400
    first = reader.partitions(p0.to_offset(), end)
    restarted = reader_on(kinesis, {}, store)  # the driver died; Spark replays the logged, uncommitted batch
    restarted.driver.plans.inline_max = 200
    again = restarted.partitions(p0.to_offset(), json.loads(json.dumps(end)))
    assert again == first and len(again) == n
    after = {1: {S(i): BatchEnd(Position.after_sequence(str(10 + i)), 1, False, "caught_up") for i in range(n)}}
    restarted.driver.progress.by_batch = after
    assert restarted.latestOffset(end, ReadAllAvailable()) == end  # every shard idle, nothing new: same offset


def test_an_offset_written_before_stored_plans_still_restarts(store: PlanStore) -> None:
    """A literal checkpoint of the previous version: inline plan, every drained ancestor listed."""
    half = TOP // 2
    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=[
        model_listing(0, 0, TOP, ending="3", starting="1"),
        model_listing(1, 0, half, (0,), ending="6", starting="4"),
        model_listing(2, half + 1, TOP, (0,), starting="5"),
        model_listing(3, 0, half, (1,), starting="7"),
    ])
    for sid, q in ((S(0), 2), (S(1), 5), (S(2), 8), (S(3), 7), (S(3), 9)):
        kinesis.put_record("orders", "k", b"x", shard_id=sid, sequence_number=str(q))
    old = (
        '{"version": 1, "run": "5e0c0f4a9b1d4c7e8f2a3b4c5d6e7f80", "batch": 4, "shards": {'
        '"shardId-000000000002": {"start": {"kind": "AFTER_SEQUENCE_NUMBER", "sequenceNumber": "8"}, "max": 0}, '
        '"shardId-000000000003": {"start": {"kind": "TRIM_HORIZON"}, "max": 100000}}, '
        '"drained": ["shardId-000000000000", "shardId-000000000001"], "finished": [], "cut": null, '
        '"pending": [], "stream": null}'
    )
    reader = reader_on(kinesis, {4: {S(3): BatchEnd(Position.after_sequence("7"), 0, False, "caught_up")}}, store)
    offset = json.loads(old)
    assert reader.driver.plans.plan_of(offset).drained == {S(0), S(1)}
    nxt = reader.driver.plans.plan_of(reader.latestOffset(offset, ReadAllAvailable()))
    assert nxt.batch == 5 and nxt.read == [S(3)] and set(nxt.shards) == {S(2), S(3)}
    assert not {c.shard_id for c in kinesis.calls_to("get_shard_iterator")} & {S(0), S(1)}  # never read again


# -- drained ancestors: the lineage implies them --------------------------------------------------


def merge_stream(records: dict[int, list[int]]) -> FakeKinesis:
    """0 splits into 1 and 2; 1 and 2 merge into 3. Shard i starts at sequence number 10*i."""
    half = TOP // 2
    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=[
        model_listing(0, 0, TOP, ending="9", starting="0"),
        model_listing(1, 0, half, (0,), ending="19", starting="10"),
        model_listing(2, half + 1, TOP, (0,), ending="29", starting="20"),
        model_listing(3, 0, TOP, (1, 2), starting="30"),
    ])
    for n, seqs in records.items():
        for q in seqs:
            kinesis.put_record("orders", "k", b"x", shard_id=S(n), sequence_number=str(q))
    return kinesis


def test_the_offset_lists_only_drained_shards_the_lineage_does_not_imply() -> None:
    kinesis = merge_stream({0: [1], 1: [11], 2: [21, 22], 3: [31]})
    ended = BatchEnd(Position.after_sequence("11"), 1, True, "shard_end")
    reader = reader_on(kinesis, {5: {S(1): ended}}, None)
    p5 = Plan("r", 5, {S(1): ShardPlan(Position.trim_horizon(), 10), S(2): ShardPlan(Position.after_sequence("21"), 0)},
              drained=frozenset({S(0)}))
    p6 = reader.driver.plans.plan_of(reader.latestOffset(p5.to_offset(), ReadAllAvailable()))
    assert p6.read == [S(2)] and set(p6.shards) == {S(2)}
    assert p6.drained == {S(1)}  # 1 waits for 2 (merge): kept; 0 is an ancestor of 2: implied
    reader.driver.progress.by_batch[6] = {S(2): BatchEnd(Position.after_sequence("22"), 1, True, "shard_end")}
    p7 = reader.driver.plans.plan_of(reader.latestOffset(p6.to_offset(), ReadAllAvailable()))
    assert p7.read == [S(3)] and p7.drained == frozenset()  # 0, 1 and 2 are all ancestors of 3


def test_a_restart_from_a_compact_offset_never_reads_a_drained_ancestor() -> None:
    kinesis = merge_stream({0: [1], 1: [11], 2: [21], 3: [31, 32]})
    p7 = Plan("r", 7, {S(3): ShardPlan(Position.after_sequence("31"), 10)})  # no drained listed at all
    restarted = reader_on(kinesis, {7: {S(3): BatchEnd(Position.after_sequence("31"), 1, False, "caught_up")}}, None)
    p8 = restarted.driver.plans.plan_of(restarted.latestOffset(json.loads(json.dumps(p7.to_offset())), ReadAllAvailable()))
    assert p8.read == [S(3)] and set(p8.shards) == {S(3)}
    assert {c.shard_id for c in kinesis.calls} <= {S(3), None}  # 0, 1, 2: never asked for


def chains(open_shards: int, depth: int) -> list[dict]:
    """Each open shard at the end of a line of ``depth`` closed ancestors (one-child reshards)."""
    width = (TOP + 1) // open_shards
    out = []
    for i in range(open_shards):
        lo, hi = i * width, TOP if i == open_shards - 1 else (i + 1) * width - 1
        ids = [i + k * open_shards for k in range(depth + 1)]
        for k, n in enumerate(ids):
            closed = k < depth
            out.append(model_listing(n, lo, hi, (ids[k - 1],) if k else (), ending="9" if closed else None, starting="1"))
    return out


def test_open_shards_with_thousands_of_ancestors_need_no_drained_ids() -> None:
    graph = ShardGraph()
    graph.update(chains(200, 5))
    open_ids = graph.open_shards()
    plan = Plan("r", 3, {s: ShardPlan(Position.trim_horizon(), 0) for s in open_ids},
                drained=frozenset(s for s in graph.shard_ids() if not graph.is_open(s)))
    assert len(plan.drained) == 1000
    compact = compact_drained(plan, graph)
    assert compact.drained == frozenset()
    frontier = with_implied_drained(advance(compact, {}), graph)
    assert frontier.drained == plan.drained
    assert admit_ready(frontier, graph, True) == admit_ready(advance(plan, {}), graph, True)


def test_idle_triggers_walk_the_lineage_for_implied_drained_shards_once() -> None:
    from kinesis_src.spark.planner import ImpliedDrained

    graph = ShardGraph()
    graph.update(chains(20, 3))
    plan = Plan("r", 3, {s: ShardPlan(Position.trim_horizon(), 0) for s in graph.open_shards()})
    implied = ImpliedDrained()
    first = implied.apply(advance(plan, {}), graph)
    assert len(first.drained) == 60 and implied.apply(advance(plan, {}), graph) == first
    assert implied.computed == 1
    graph.update([model_listing(80, 0, 10, (0,), starting="1")])  # the lineage changed: walk again
    implied.apply(advance(plan, {}), graph)
    assert implied.computed == 2


# -- several streams: one offset holds every stream's plan -----------------------------------------


def two_streams(records: dict[str, list[int]]) -> FakeKinesis:
    """Streams "orders" and "payments", one shard each; ``records[stream]`` are its sequence numbers."""
    kinesis = FakeKinesis()
    for name in ("orders", "payments"):
        kinesis.create_stream(name, listing=[model_listing(0, 0, TOP, starting="1")])
        for q in records.get(name, ()):
            kinesis.put_record(name, f"k{q}", b"x", shard_id=S(0), sequence_number=str(q))
    return kinesis


def reader_of(kinesis: FakeKinesis, streams: str, ends: dict[str, dict], **options: str) -> KinesisStreamReader:
    opts = parse_options({"streamName": streams, "region": "us-east-1", "initialPosition": "trim_horizon", **options},
                         batch=False, environ={})
    reader = KinesisStreamReader(opts)
    for ref in opts.streams:
        reader._drivers[ref.name] = StreamDriver(
            opts, kinesis=kinesis, progress=RecordedEnds(ends.get(ref.name, {})), claim=NoClaim(), stream=ref
        )
    return reader


def caught_up(seq: str) -> BatchEnd:
    return BatchEnd(Position.after_sequence(seq), 1, False, "caught_up")


def test_one_offset_holds_every_stream_and_each_stream_plans_on_its_own() -> None:
    kinesis = two_streams({"orders": [1, 2], "payments": [5]})
    reader = reader_of(kinesis, "orders,payments", {})
    initial = reader.initialOffset()
    assert initial["version"] == 3 and list(initial["streams"]) == ["orders", "payments"]
    assert {n: o["batch"] for n, o in initial["streams"].items()} == {"orders": 0, "payments": 0}
    end = json.loads(json.dumps(reader.latestOffset(initial, ReadAllAvailable())))
    parts = reader.partitions(initial, end)
    assert [(p.stream, p.index, p.slices[0].shard_id) for p in parts] == [("orders", 0, S(0)), ("payments", 1, S(0))]
    # the next batch: orders has a new record, payments has none: only orders moves and is read
    kinesis.put_record("orders", "k3", b"x", shard_id=S(0), sequence_number="3")
    reader._drivers["orders"].progress.by_batch[1] = {S(0): caught_up("2")}
    reader._drivers["payments"].progress.by_batch[1] = {S(0): caught_up("5")}
    nxt = reader.latestOffset(end, ReadAllAvailable())
    assert nxt["streams"]["payments"] == end["streams"]["payments"]
    assert Plan.from_offset(nxt["streams"]["orders"]).batch == 2
    assert [p.stream for p in reader.partitions(end, nxt)] == ["orders"]


def test_an_offset_of_todays_single_stream_version_restarts_and_a_stream_added_starts_at_the_initial_position() -> None:
    """A literal one-stream checkpoint (no 'streams' key); the restart names a second stream."""
    kinesis = two_streams({"orders": [1, 2, 3], "payments": [7, 8]})
    old = (
        '{"version": 1, "run": "5e0c0f4a9b1d4c7e8f2a3b4c5d6e7f80", "batch": 4, "shards": {'
        '"shardId-000000000000": {"start": {"kind": "AFTER_SEQUENCE_NUMBER", "sequenceNumber": "1"}, "max": 100000}}, '
        '"drained": [], "finished": [], "cut": null, "pending": [], "stream": null}'
    )
    offset = json.loads(old)
    alone = reader_of(kinesis, "orders", {}).latestOffset(offset, ReadAllAvailable())
    assert "streams" not in alone and Plan.from_offset(alone).run == offset["run"]  # one stream: one-stream offsets
    reader = reader_of(kinesis, "orders,payments", {"orders": {4: {S(0): caught_up("2")}}})
    end = reader.latestOffset(offset, ReadAllAvailable())
    orders, payments = Plan.from_offset(end["streams"]["orders"]), Plan.from_offset(end["streams"]["payments"])
    assert orders.run == "5e0c0f4a9b1d4c7e8f2a3b4c5d6e7f80" and orders.batch == 5
    assert orders.shards[S(0)].start == Position.after_sequence("2")
    assert payments.run != orders.run and payments.batch == 1
    assert payments.shards[S(0)].start == Position.trim_horizon()  # initialPosition
    again = reader.latestOffset(offset, ReadAllAvailable())
    assert again["streams"]["payments"] == end["streams"]["payments"]  # asked again: one run id, one first plan
    assert sorted(p.stream for p in reader.partitions(offset, end)) == ["orders", "payments"]


def test_a_stream_removed_from_the_list_is_dropped_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    kinesis = two_streams({"orders": [1], "payments": [5]})
    both = reader_of(kinesis, "orders,payments", {})
    initial = both.initialOffset()
    only = reader_of(kinesis, "orders", {})
    with caplog.at_level("WARNING", logger="kinesis_src.spark.stream"):
        end = only.latestOffset(initial, ReadAllAvailable())
    assert "streams" not in end and Plan.from_offset(end).batch == 1  # back to a one-stream offset
    assert [r.getMessage() for r in caplog.records if "'payments'" in r.getMessage() and "dropped" in r.getMessage()]
    assert [p.stream for p in only.partitions(initial, end)] == ["orders"]
    assert {c.stream for c in kinesis.calls_to("get_shard_iterator")} <= {"orders"}  # payments: never read again


def test_a_recreated_stream_is_refused_by_name_while_the_others_are_fine() -> None:
    from datetime import timedelta

    from kinesis_src.errors import StreamRecreatedError

    kinesis = two_streams({"orders": [1], "payments": [5]})
    initial = reader_of(kinesis, "orders,payments", {}).initialOffset()
    kinesis.stream("payments").created += timedelta(hours=1)  # deleted and created again
    with pytest.raises(StreamRecreatedError, match="payments") as failed:
        reader_of(kinesis, "orders,payments", {}).latestOffset(initial, ReadAllAvailable())
    assert "stream/payments" in str(failed.value) and "stream/orders" not in str(failed.value)


def test_join_and_split_offsets_are_inverse_and_one_stream_stays_as_it_was() -> None:
    from kinesis_src.spark.offsets import join_offsets, split_offset

    one = Plan("r", 3, {S(0): ShardPlan(Position.trim_horizon(), 5)}).to_offset()
    assert join_offsets({"orders": one}) == one
    assert split_offset(one, ["orders", "payments"]) == {"orders": one}  # no identity: the first stream's
    two = join_offsets({"payments": one, "orders": one})
    assert list(two["streams"]) == ["orders", "payments"]  # fixed key order: equal plans, equal JSON text
    assert split_offset(json.loads(json.dumps(two)), ["payments"]) == {"orders": one, "payments": one}
    with pytest.raises(ConfigurationError, match="not a kinesis-src offset"):
        split_offset({"version": 3, "streams": ["x"]}, ["orders"])


def test_max_records_per_trigger_is_split_between_the_streams_and_lag_is_reported_per_stream() -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    kinesis = two_streams({"orders": [1, 2, 3, 4], "payments": [5, 6, 7]})
    reader = reader_of(kinesis, "orders,payments", {})
    end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(3))
    quota = {n: Plan.from_offset(o).shards[S(0)].max_records for n, o in end["streams"].items()}
    assert quota == {"orders": 2, "payments": 1}  # 3 rows: a hard cap over both streams
    assert set(reader.reportLatestOffset()["millisBehindLatest"]) == {"orders", "payments"}
