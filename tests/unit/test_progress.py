"""Per-batch progress on moto: first writer wins, one Query per batch, fencing, purge, request counts."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ConfigurationError, CorruptLeaseError, LeaseLostError
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.progress_store import ProgressStore, ShardProgress
from kinesis_src.leases.table import LeaseTable
from kinesis_src.positions import Position
from kinesis_src.retry import RetryPolicy
from lineage import MAX_HASH_KEY, HashRange

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
RUN = "0b6c7f0e-5d7e-4c4e-9a53-0e0d9b9e0a11"


def sid(i: int) -> str:
    return f"shardId-{i:012d}"


def at(i: int, seq: int, ended: bool = False) -> ShardProgress:
    children = (sid(100 + i),) if ended else ()
    return ShardProgress(sid(i), Position.after_sequence(str(seq)), ended, children, records=seq % 7)


@pytest.fixture
def leases(dummy_credentials: None):
    with mock_aws():
        table = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1", retry=FAST)), "progress-unit", "app", "orders")
        table.ensure_table()
        yield table


@pytest.fixture
def store(leases: LeaseTable) -> ProgressStore:
    return ProgressStore.of(leases)


def requests(store: ProgressStore) -> int:
    return store.dynamodb.request_total()


def test_first_writer_wins_and_the_second_sees_the_first(store: ProgressStore) -> None:
    first = store.record(RUN, 7, at(0, 111, ended=True))
    assert first.recorded
    second = store.record(RUN, 7, at(0, 999))
    assert not second.recorded and second.progress == at(0, 111, ended=True)
    assert not second.progress.same_outcome(at(0, 999)) and second.progress.same_outcome(at(0, 111, ended=True))
    assert store.record(RUN, 8, at(0, 999)).recorded  # another batch is another item


def test_a_batch_of_100_shards_costs_100_puts_1_query_and_4_deletes(store: ProgressStore) -> None:
    before = requests(store)
    for i in range(100):
        store.record(RUN, 3, at(i, 1000 + i))
    assert requests(store) - before == 100
    before = requests(store)
    batch = store.read_batch(RUN, 3)
    assert requests(store) - before == 1
    assert batch == {sid(i): at(i, 1000 + i) for i in range(100)}
    before = requests(store)
    assert store.purge_batch(RUN, 3, batch) == 100
    assert requests(store) - before == 4
    assert store.read_batch(RUN, 3) == {}


def test_record_many_writes_a_task_in_one_request_and_handles_reruns(store: ProgressStore) -> None:
    before = requests(store)
    results = store.record_many(RUN, 1, [at(i, 10 + i) for i in range(0, 100, 2)])
    assert requests(store) - before == 1 and all(r.recorded for r in results.values())
    before = requests(store)
    rerun = store.record_many(RUN, 1, [at(i, 500 + i) for i in range(100)])
    assert requests(store) - before == 2  # one cancelled transaction, one for the shards not yet recorded
    assert all(not rerun[sid(i)].recorded and rerun[sid(i)].progress == at(i, 10 + i) for i in range(0, 100, 2))
    assert all(rerun[sid(i)].recorded for i in range(1, 100, 2))
    assert len(store.read_batch(RUN, 1)) == 100


def test_fenced_progress_needs_the_lease_as_held(store: ProgressStore, leases: LeaseTable) -> None:
    leases.create_lease(Lease(sid(0), Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
    held = leases.take_lease(leases.get_lease(sid(0)), "w1")
    assert store.record_fenced(held, RUN, 1, at(0, 5)).recorded
    again = store.record_fenced(held, RUN, 1, at(0, 6))
    assert not again.recorded and again.progress == at(0, 5)
    stolen = leases.steal_lease(held, "w2")
    with pytest.raises(LeaseLostError, match=r"progress write for batch 2.*owner w2, counter 2"):
        store.record_fenced(held, RUN, 2, at(0, 7))
    assert store.get(RUN, 2, sid(0)) is None and leases.get_lease(sid(0)) == stolen
    assert store.record_fenced(stolen, RUN, 2, at(0, 7)).recorded


DAY_MS = 24 * 3600 * 1000


def sweep_expired(now_s: int) -> int:
    """What DynamoDB's TTL sweeper does (moto does not): delete items whose ``ttl`` has passed."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    expired = [i for i in client.scan(TableName="progress-unit")["Items"] if "ttl" in i and int(i["ttl"]["N"]) <= now_s]
    for item in expired:
        client.delete_item(TableName="progress-unit", Key={"pk": item["pk"], "sk": item["sk"]})
    return len(expired)


def test_items_carry_no_ttl(store: ProgressStore) -> None:
    """The ends of a run's last batches are the only record of where it resumes: never expire them."""
    store.record(RUN, 1, at(0, 1))
    store.record_many(RUN, 2, [at(1, 2)])
    client = boto3.client("dynamodb", region_name="us-east-1")
    items = client.scan(TableName="progress-unit")["Items"]
    assert len(items) == 2 and all("ttl" not in item for item in items)


def test_a_restart_finds_its_ends_however_long_the_query_was_stopped(store: ProgressStore, leases: LeaseTable) -> None:
    from kinesis_src.spark.offsets import Plan, ShardPlan
    from kinesis_src.spark.planner import BatchEnd, advance
    from kinesis_src.spark.progress_log import ProgressLog

    stopped_at = 1_800_000_000_000
    store.now_ms = lambda: stopped_at
    ProgressLog(store).record_many(RUN, 5, {sid(i): BatchEnd(Position.after_sequence(str(40 + i)), 3, False, "caught_up") for i in range(3)})
    sweep_expired((stopped_at + 365 * DAY_MS) // 1000)
    restarted = ProgressLog(ProgressStore.of(leases))  # a new driver, a year later
    plan = Plan(run=RUN, batch=5, shards={sid(i): ShardPlan(Position.trim_horizon(), 10) for i in range(3)})
    frontier = advance(plan, restarted.ends(RUN, 5))
    assert frontier.positions == {sid(i): Position.after_sequence(str(40 + i)) for i in range(3)}


def test_corrupt_progress_items_name_the_attribute(store: ProgressStore) -> None:
    store.record(RUN, 1, at(0, 1))
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName="progress-unit", Key=store._key(RUN, 1, sid(0)),
        UpdateExpression="SET endPosition = :p", ExpressionAttributeValues={":p": {"S": '{"kind":"SOMEWHERE"}'}},
    )
    with pytest.raises(CorruptLeaseError, match=r"progress#app#orders#.*#1.*'endPosition'"):
        store.read_batch(RUN, 1)


def test_run_and_batch_ids_are_validated(store: ProgressStore) -> None:
    with pytest.raises(ConfigurationError, match="run id"):
        store.record("a#b", 1, at(0, 1))
    with pytest.raises(ConfigurationError, match="batch id"):
        store.read_batch(RUN, -1)


def test_stop_reason_and_lag_round_trip(dummy_credentials) -> None:
    """The Spark planner reads why a read stopped (more data or not) and the lag from progress."""
    from moto import mock_aws

    from kinesis_src.aws.dynamodb import DynamoDBClient
    from kinesis_src.config import AwsSettings
    from kinesis_src.leases.progress_store import ProgressStore, ShardProgress
    from kinesis_src.leases.table import LeaseTable
    from kinesis_src.positions import Position

    with mock_aws():
        table = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "t-progress", "app", "orders")
        table.ensure_table()
        store = ProgressStore.of(table)
        limited = ShardProgress("shardId-000000000001", Position.after_sequence("42"), records=3, stop_reason="record_limit", millis_behind_latest=1500)
        idle = ShardProgress("shardId-000000000002", Position.trim_horizon(), stop_reason="caught_up")
        store.record_many("run1", 4, [limited, idle])
        back = store.read_batch("run1", 4)
        assert back["shardId-000000000001"] == limited
        assert back["shardId-000000000002"] == idle


# -- the Spark source's items: what each shard's read cost (kinesis_src.spark.progress_log, .task_figures) ------


def spark_task_log(leases: LeaseTable):  # -> ProgressLog (the Spark modules are imported lazily here)
    from kinesis_src.leases.progress_store import ProgressStore
    from kinesis_src.spark.progress_log import ProgressLog

    return ProgressLog(ProgressStore(leases.dynamodb, leases.table_name, leases.application, leases.stream))


def test_spark_items_carry_the_reads_bytes_throttles_and_retries_first_writer_wins(leases: LeaseTable) -> None:
    from kinesis_src.spark.planner import BatchEnd
    from kinesis_src.spark.progress_log import driver_progress_log

    end = BatchEnd(Position.after_sequence("42"), 3, False, "caught_up", 0, byte_count=300, throttles=2, retries=5)
    assert spark_task_log(leases).record_many(RUN, 3, {sid(0): end}) == {sid(0): end}
    assert driver_progress_log(leases).ends(RUN, 3) == {sid(0): end}
    # A re-run of the batch reads the first writer's end back, cost included: each batch is counted once.
    rerun = BatchEnd(Position.after_sequence("42"), 3, False, "caught_up", 0, byte_count=300, throttles=0, retries=0)
    assert spark_task_log(leases).record_many(RUN, 3, {sid(0): rerun}) == {sid(0): end}


def test_an_item_without_the_read_cost_reads_as_zeros(store: ProgressStore, leases: LeaseTable) -> None:
    from kinesis_src.spark.progress_log import driver_progress_log

    store.record(RUN, 4, at(1, 50))  # a plain ShardProgress: what an earlier version's task wrote
    (end,) = driver_progress_log(leases).ends(RUN, 4).values()
    assert (end.record_count, end.byte_count, end.throttles, end.retries) == (50 % 7, 0, 0, 0)


class RecordingProgressLog:
    def __init__(self) -> None:
        self.recorded: dict = {}

    def record_many(self, run: str, batch: int, ends: dict) -> dict:
        self.recorded.update(ends)
        return dict(ends)


def test_a_task_records_each_shards_bytes_and_the_throttles_and_retries_of_its_own_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stubbed read per shard that is throttled (and once unavailable) before it succeeds, retried by the
    real retry helper: each shard's end counts its own read's retries, not the other shard's."""
    from kinesis_src.errors import ServiceUnavailableError, ThrottledError
    from kinesis_src.records import RecordPage
    from kinesis_src.retrieval.bounded import ShardRead
    from kinesis_src.retrieval.cursor import StopReason
    from kinesis_src.retry import call_with_retry
    from kinesis_src.spark import tasks
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice

    failures = {sid(0): [ThrottledError("slow down"), ServiceUnavailableError("503"), ThrottledError("slow down")],
                sid(1): [ThrottledError("slow down")]}
    data = {sid(0): [b"a" * 10, b"b" * 7], sid(1): [b"c" * 3]}
    policy = RetryPolicy(max_attempts=5, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)  # 4 for shard 0

    def stub_read(kinesis: object, partition: KinesisPartition, piece: ShardSlice) -> ShardRead:
        pending = failures[piece.shard_id]

        def get_records() -> RecordPage:
            if pending:
                raise pending.pop(0)
            records = data[piece.shard_id]
            seqs = [str(n) for n in range(1, len(records) + 1)]
            return RecordPage(["k"] * len(records), records, seqs, [None] * len(records), [None] * len(records),
                              "iterator", 0)

        page = call_with_retry(get_records, f"GetRecords on {piece.shard_id}", policy, sleep=lambda s: None)
        last = Position.after_sequence(page.sequence_numbers[-1])
        return ShardRead(piece.shard_id, Position.trim_horizon(), last, [page], StopReason.CAUGHT_UP, 0)

    recording = RecordingProgressLog()
    monkeypatch.setattr(tasks, "kinesis_client", lambda endpoint: object())
    monkeypatch.setattr(tasks, "read_slice", stub_read)
    monkeypatch.setattr(tasks, "task_progress_log", lambda *a: recording)
    monkeypatch.setattr(tasks, "page_batch", lambda *a: None)  # rows are not the point here
    partition = KinesisPartition(
        index=0, stream="orders", endpoint=Endpoint("us-east-1", None, None),
        slices=tuple(ShardSlice(s, Position.trim_horizon().to_dict(), 10) for s in (sid(0), sid(1))),
        fetch_interval_ms=0, progress={"table": "t", "application": "a", "run": "r", "batch": "4"},
    )

    assert list(tasks.read_stream_partition(partition)) == []
    costs = {s: (e.record_count, e.byte_count, e.throttles, e.retries) for s, e in recording.recorded.items()}
    assert costs == {sid(0): (2, 17, 2, 3), sid(1): (1, 3, 1, 1)}


def test_throttles_are_the_retries_of_throttled_errors_and_their_subclasses() -> None:
    from kinesis_src.spark.task_figures import RetryTally

    before = {"ThrottledError": 4, "ServiceUnavailableError": 1}
    after = {"ThrottledError": 6, "SubscriptionBusyError": 1, "ServiceUnavailableError": 1, "EndpointUnreachableError": 2}
    assert RetryTally.between(before, after) == RetryTally(retries=5, throttles=3)


def test_the_driver_sums_each_batch_end_per_shard_and_the_collector_reads_several_streams() -> None:
    import json

    from kinesis_src.metrics import source_figures
    from kinesis_src.spark.planner import BatchEnd
    from kinesis_src.spark.task_figures import ShardTotals

    orders, refunds = ShardTotals.empty(), ShardTotals.empty()
    for byte_count, throttles, retries in ((100, 1, 2), (50, 0, 1)):  # two batches of shard 0
        orders.add(sid(0), BatchEnd(Position.after_sequence("1"), 1, False, "caught_up", 0, byte_count, throttles, retries))
    refunds.add(sid(3), BatchEnd(Position.after_sequence("9"), 4, False, "caught_up", 0, 7, 0, 0))
    assert orders.report() == {"bytesRead": {sid(0): 150}, "throttles": {sid(0): 1}, "retries": {sid(0): 3}}

    costs = {"orders": orders.report(), "refunds": refunds.report()}
    report = {"millisBehindLatest": {"orders": {sid(0): 0}, "refunds": {sid(3): 5}},
              "dataLoss": {"orders": {}, "refunds": {}},
              **{key: {name: cost[key] for name, cost in costs.items()} for key in ("bytesRead", "throttles", "retries")}}
    figures = source_figures({"latestOffset": json.dumps(report), "numInputRows": 5})
    assert figures is not None
    assert figures.bytes_read == {("orders", sid(0)): 150, ("refunds", sid(3)): 7}
    assert figures.throttles == {("orders", sid(0)): 1, ("refunds", sid(3)): 0}
    assert figures.retries == {("orders", sid(0)): 3, ("refunds", sid(3)): 0}
