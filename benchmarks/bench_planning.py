"""Driver planning at scale (#12 target 4): probe rounds, offset size, per-batch planning work.

Run: .venv/bin/python benchmarks/bench_planning.py [--probe-shards 1000] [--latency-ms 20] [--no-before]
                                                   [--open 1000] [--ancestors 5000] [--repeat 5]

1. latestOffset as Spark calls it under a 0 s trigger, with ``--probe-shards``
   idle shards (one record each, every shard read to its tip by batch 1) on
   the replay endpoint (benchmarks/replay_endpoint.py, its own process,
   ``--latency-ms`` per call). Side by side: the prober one shard after
   another (what the driver did before; ``--no-before`` skips it, ~75 s at
   1,000 shards) and the concurrent prober (kinesis_src/spark/probes.py).
   The first trigger is a restart (the driver never planned this run): it
   lists the stream and checks every position for a partial trim (2 calls
   per shard) before probing. Printed: the first trigger, the steady
   triggers (median, max, shards probed), the time until every shard was
   probed once more (round), CPU per probe, and GetRecords per shard per
   second counted by the server over the steady window.
2. One batch's planning on a lineage of ``--open`` open shards and
   ``--ancestors`` closed ones (repeated one-child splits), progress and
   plans in DynamoDB on moto (in-process): progress read-back, planning,
   the offset inline (before) and stored by digest (after), reading a stored
   plan back as a restart does, and partitions() ranking the lineage every
   batch (before) or keeping the ranks (after). Median of ``--repeat``.

The Kinesis listing itself is not timed (it is incremental and paged by the
service); the lineage update cost per page is in bench_lineage.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from dataclasses import dataclass, field

from kinesis_src.positions import Position
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import (
    BatchEnd,
    LineageRanks,
    admit_ready,
    advance,
    compact_drained,
    next_plan,
    with_implied_drained,
)
from lineage import ShardGraph

TOP = 2**128 - 1


def history(open_target: int, ancestors: int) -> list[dict]:
    """Split every open shard once per generation until the counts are reached; deterministic."""
    shards: dict[int, dict] = {}
    open_ranges: list[tuple[int, int, int]] = []  # (id, lo, hi)
    width = (TOP + 1) // open_target
    for i in range(open_target):
        lo = i * width
        hi = TOP if i == open_target - 1 else (i + 1) * width - 1
        shards[i] = _shard(i, lo, hi, ())
        open_ranges.append((i, lo, hi))
    next_id = open_target
    closed = 0
    while closed < ancestors:
        nxt = []
        for sid, lo, hi in open_ranges:
            if closed >= ancestors:
                nxt.append((sid, lo, hi))
                continue
            _close(shards[sid])
            closed += 1
            shards[next_id] = _shard(next_id, lo, hi, (sid,))  # a one-child "split" keeps the count stable
            nxt.append((next_id, lo, hi))
            next_id += 1
        open_ranges = nxt
    return list(shards.values())


def _shard(n: int, lo: int, hi: int, parents: tuple[int, ...]) -> dict:
    out = {
        "ShardId": f"shardId-{n:012d}",
        "HashKeyRange": {"StartingHashKey": str(lo), "EndingHashKey": str(hi)},
        "SequenceNumberRange": {"StartingSequenceNumber": str(10**20 + n)},
    }
    if parents:
        out["ParentShardId"] = f"shardId-{parents[0]:012d}"
    return out


def _close(shard: dict) -> None:
    shard["SequenceNumberRange"]["EndingSequenceNumber"] = str(10**21)


# -- 1. latestOffset's probe rounds against the replay endpoint ----------------------------------------


class _NoClaim:
    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


class _PlansInMemory:
    """The lease table's plan items, in a dict (this part measures Kinesis calls, not DynamoDB)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], str] = {}

    def put(self, run: str, batch: int, digest: str, text: str) -> None:
        self.items[(run, batch, digest)] = text

    def get(self, run: str, batch: int, digest: str) -> str:
        return self.items[(run, batch, digest)]


class _EveryShardCaughtUp:
    """The progress log of batch 1: every shard read to the tip (so all are idle and need a probe)."""

    def __init__(self, ends: dict) -> None:
        self.by_batch = {1: ends}

    def ends(self, run: str, batch: int) -> dict:
        return dict(self.by_batch.get(batch, {}))

    def purge_before(self, run: str, batch: int, shard_ids=None) -> None:
        pass


@dataclass
class ProbeRun:
    """One prober's triggers: the first, until every shard was probed once, then back-to-back steady ones."""

    name: str
    first_s: float = 0.0
    all_probed_s: float = 0.0  # from the first trigger until every shard was checked (restart) and probed
    worst_s: float = 0.0  # the longest trigger of the whole run
    triggers: list[float] = field(default_factory=list)  # steady
    round_s: float = 0.0  # steady: until every shard was probed once more
    cpu_per_probe_ms: float = 0.0
    calls_per_shard_s: float = 0.0  # GetRecords per shard per second over the steady window (server's count)


def probe_rounds(ep, name: str, workers: int, budget_s: float, rounds: int, restart: bool) -> ProbeRun:
    """latestOffset as Spark calls it with a 0 s trigger, nothing new in any shard.

    ``restart``: the driver never planned this run, so every position is checked for a partial trim
    first (2 calls per shard); otherwise it listed the stream at the run's start, as a fresh start does.
    """
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kinesis_src.spark.driver import StreamDriver
    from kinesis_src.spark.options import parse_options
    from kinesis_src.spark.probes import IdleProber
    from kinesis_src.spark.stream import KinesisStreamReader

    opts = parse_options(
        {"streamName": ep.stream_name, "region": "us-east-1", "endpointUrl": ep.endpoint_url}, batch=False, environ={}
    )
    tips = {s.shard_id: Position.after_sequence(s.sequence_number(s.count - 1)) for s in ep.stream.shards}
    ends = {sid: BatchEnd(pos, 1, False, "caught_up") for sid, pos in tips.items()}
    plan = Plan("bench", 1, {sid: ShardPlan(Position.trim_horizon(), 1000) for sid in tips})
    reader = KinesisStreamReader(opts)
    driver = StreamDriver(opts, progress=_EveryShardCaughtUp(ends), claim=_NoClaim(), plans=_PlansInMemory())
    driver.prober = IdleProber(driver.kinesis, opts.stream_name, opts.idle_poll_interval_ms / 1000, workers, budget_s)
    reader._driver = driver
    if not restart:
        driver.initial_frontier(Position.trim_horizon())  # the run's start: listed, nothing to check
    probed: set[str] = set()
    counted: list[int] = []
    probe = driver.prober.probe

    def counting(ids, positions):
        found = probe(ids, positions)
        probed.update(found)
        counted.append(len(found))
        return found

    driver.prober.probe = counting  # type: ignore[method-assign]
    start = driver.plans.offset_of(plan)  # by digest, as a plan this large is in the offset log
    run = ProbeRun(name)

    began = time.perf_counter()
    while len(probed) < len(tips):  # the first round: checks after a restart, then an iterator per shard
        t = time.perf_counter()
        assert reader.latestOffset(start, ReadAllAvailable()) == start  # nothing new: no batch
        took = time.perf_counter() - t
        run.first_s = run.first_s or took
        run.worst_s = max(run.worst_s, took)
    run.all_probed_s = time.perf_counter() - began
    before = ep.stats()["calls"].get("GetRecords", 0)
    cpu, began = time.process_time(), time.perf_counter()
    counted.clear()
    while sum(counted) < rounds * len(tips):
        t = time.perf_counter()
        reader.latestOffset(start, ReadAllAvailable())
        run.triggers.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - began
    run.worst_s = max(run.worst_s, *run.triggers)
    run.round_s = elapsed / rounds
    run.cpu_per_probe_ms = (time.process_time() - cpu) / sum(counted) * 1000
    run.calls_per_shard_s = (ep.stats()["calls"].get("GetRecords", 0) - before) / len(tips) / elapsed
    driver.close()
    return run


def bench_probes(shards: int, latency_ms: float, before: bool) -> list[ProbeRun]:
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from replay_endpoint import ReplayEndpoint

    from kinesis_src.spark.probes import PROBE_BUDGET_S, PROBE_WORKERS

    runs = []
    after = f"{PROBE_WORKERS} threads, {PROBE_BUDGET_S} s budget"
    with ReplayEndpoint(shards=shards, records_per_shard=1, size=100, latency_s=latency_ms / 1000, mode="process") as ep:
        if before:
            runs.append(probe_rounds(ep, "restart, one shard after another (before)", 1, math.inf, 1, restart=True))
        runs.append(probe_rounds(ep, f"restart, {after}", PROBE_WORKERS, PROBE_BUDGET_S, 3, restart=True))
        runs.append(probe_rounds(ep, f"fresh start, {after}", PROBE_WORKERS, PROBE_BUDGET_S, 3, restart=False))
    return runs


def print_probes(runs: list[ProbeRun], shards: int, latency_ms: float) -> None:
    print(f"\n1. latestOffset with {shards:,} idle shards, replay endpoint, {latency_ms:g} ms per call, 0 s trigger")
    print(
        f"   {'prober':<46}{'1st trigger':>12}{'all probed':>11}{'worst':>8}{'steady p50':>11}{'max':>7}"
        f"{'round':>7}{'CPU/probe':>10}{'calls/shard/s':>14}{'worst/1 s':>10}"
    )
    for r in runs:
        print(
            f"   {r.name:<46}{r.first_s:>11.2f}s{r.all_probed_s:>10.1f}s{r.worst_s:>7.2f}s"
            f"{statistics.median(r.triggers):>10.2f}s{max(r.triggers):>6.2f}s{r.round_s:>6.1f}s"
            f"{r.cpu_per_probe_ms:>8.2f}ms{r.calls_per_shard_s:>14.2f}{r.worst_s:>9.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--open", type=int, default=1000)
    parser.add_argument("--ancestors", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--probe-shards", type=int, default=1000, help="idle shards for the probe rounds (0: skip)")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--no-before", action="store_true", help="skip the sequential prober (~75 s at 1,000)")
    opts = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    if opts.probe_shards:
        runs = bench_probes(opts.probe_shards, opts.latency_ms, not opts.no_before)
        print_probes(runs, opts.probe_shards, opts.latency_ms)

    bench_batches(opts.open, opts.ancestors, opts.repeat)


def sequence_numbers(count: int) -> list[str]:
    """Kinesis-sized sequence numbers (56 digits): the positions are most of a plan's bytes."""
    rng = random.Random(7)
    return [str(rng.randrange(10**55, 10**56)) for _ in range(count)]


def bench_batches(open_target: int, ancestors: int, repeat: int) -> None:
    """1. The driver's per-batch work on a long lineage, before/after, progress and plans on moto."""
    from types import SimpleNamespace

    from moto import mock_aws

    from kinesis_src.aws.dynamodb import DynamoDBClient
    from kinesis_src.config import AwsSettings
    from kinesis_src.leases.progress_store import ProgressStore, ShardProgress
    from kinesis_src.leases.table import LeaseTable
    from kinesis_src.spark.options import parse_options
    from kinesis_src.spark.plan_store import PlanBook, PlanStore
    from kinesis_src.spark.stream import KinesisStreamReader

    t0 = time.perf_counter()
    graph = ShardGraph()
    graph.update(history(open_target, ancestors))
    graph.validate()
    build_s = time.perf_counter() - t0
    open_ids = graph.open_shards()
    closed = len(graph) - len(open_ids)
    print(f"\n2. one batch's planning: {len(open_ids):,} open shards, {closed:,} closed ancestors "
          f"(graph built in {build_s:.2f} s), 56-digit sequence numbers, DynamoDB on moto")
    starts, ends_at = sequence_numbers(len(open_ids)), sequence_numbers(len(open_ids))
    drained = frozenset(s for s in graph.shard_ids() if not graph.is_open(s))
    plan = Plan(
        run="bench",
        batch=7,
        shards={s: ShardPlan(Position.after_sequence(q), 1000) for s, q in zip(open_ids, starts)},
        drained=drained,
    )
    opts = parse_options({"streamName": "orders", "region": "us-east-1"}, batch=False, environ={})
    with mock_aws():
        table = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "bench-planning", "app", "orders")
        table.ensure_table()
        store = ProgressStore.of(table)
        plans = PlanStore.of(table)
        progresses = [
            ShardProgress(s, Position.after_sequence(q), records=100, stop_reason="caught_up")
            for s, q in zip(open_ids, ends_at)
        ]
        for i in range(0, len(progresses), 100):
            store.record_many("bench", 7, progresses[i : i + 100])
        compact = compact_drained(plan, graph)
        driver = SimpleNamespace(
            discovery=SimpleNamespace(graph=graph), ranks=LineageRanks(), fan_out=None, identity=None,
            plans=PlanBook(plans),
        )
        reader = KinesisStreamReader(opts)
        reader._driver = driver  # type: ignore[assignment]
        steps = ("progress Query", "plan (before)", "plan (after)", "offset inline (before)", "offset stored (after)",
                 "plan read back (restart)", "partitions (before)", "partitions (after)")
        timings: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(repeat):
            t = time.perf_counter()
            recorded = store.read_batch("bench", 7)
            timings["progress Query"].append(time.perf_counter() - t)
            ends = {s: BatchEnd(p.end, p.records, p.shard_ended, p.stop_reason) for s, p in recorded.items()}

            t = time.perf_counter()  # before: every drained id in the plan
            frontier = admit_ready(advance(plan, ends), graph, preserve_order=True)
            full = next_plan(plan, frontier, {s: True for s in open_ids}, 1000, None, None)
            timings["plan (before)"].append(time.perf_counter() - t)

            t = time.perf_counter()  # after: drained ids the lineage implies are left out, and added back
            frontier = with_implied_drained(advance(compact, ends), graph)
            frontier = admit_ready(frontier, graph, preserve_order=True)
            nxt = compact_drained(next_plan(compact, frontier, {s: True for s in open_ids}, 1000, None, None), graph)
            timings["plan (after)"].append(time.perf_counter() - t)
            assert nxt.shards == full.shards and frontier.drained == full.drained

            t = time.perf_counter()
            inline = json.dumps(full.to_offset())
            timings["offset inline (before)"].append(time.perf_counter() - t)
            inline_compact = json.dumps(nxt.to_offset())

            driver.plans = PlanBook(plans)  # nothing cached: every round stores the plan
            t = time.perf_counter()
            reference = json.dumps(driver.plans.offset_of(nxt))
            timings["offset stored (after)"].append(time.perf_counter() - t)

            t = time.perf_counter()
            assert PlanBook(plans).plan_of(json.loads(reference)) == nxt
            timings["plan read back (restart)"].append(time.perf_counter() - t)

            previous = plan.to_offset()
            driver.ranks = LineageRanks()  # before: the lineage ranked again for every batch
            t = time.perf_counter()
            parts = reader.partitions(previous, json.loads(reference))
            timings["partitions (before)"].append(time.perf_counter() - t)
            t = time.perf_counter()
            parts = reader.partitions(previous, json.loads(reference))  # after: ranks kept from the last batch
            timings["partitions (after)"].append(time.perf_counter() - t)
        stored = plans.dynamodb.query(plans.table_name, "pk", plans.partition("bench", 8))
    assert len(parts) == len(open_ids)

    body = sum(len(item["body"]["B"]) for item in stored)
    print(f"   offset before (the plan inline): {len(inline) / 1024:,.0f} KiB, {len(full.drained):,} drained listed")
    print(f"   the plan inline, implied drained ids left out: {len(inline_compact) / 1024:,.0f} KiB, "
          f"{len(nxt.drained):,} drained listed")
    print(f"   offset after (plan by digest):   {len(reference):,} B = {len(reference) / 16384:.3f}x the 16 KiB target; "
          f"stored plan {body / 1024:,.0f} KiB zlib in {len(stored)} item(s)")
    print(f"   {'step':<28}{'median ms':>11}")
    for step, values in timings.items():
        print(f"   {step:<28}{statistics.median(values) * 1000:>11.1f}")
    before = statistics.median(timings["partitions (before)"])
    after = statistics.median(timings["partitions (after)"])
    print(f"   partitions after / before: {after / before:.2f}x (lineage walks: {driver.ranks.computed} for the run)")


if __name__ == "__main__":
    main()
