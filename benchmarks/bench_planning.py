"""Driver planning time per micro-batch: 1,000 open shards with 5,000 closed ancestors.

Run: .venv/bin/python benchmarks/bench_planning.py [--open 1000] [--ancestors 5000] [--repeat 5]

Builds a stream history by repeatedly splitting (then merging back) shards
until the lineage holds the requested closed ancestors and open shards,
records one batch's progress for every open shard in the lease table
(moto, in-process), and times the driver's per-batch work:

- progress read-back: one consistent Query for the batch (paged),
- planning: advance the frontier, admit ready shards, build the next plan,
- the offset's JSON text (what Spark writes to its offset log),
- partitions: lineage ranking and grouping into tasks.

The Kinesis listing itself is not timed (it is incremental and paged by the
service, not by us); the lineage update cost per page is in bench_lineage.py.

Measured here (2 cores, Python 3.11, moto in-process), median of 3:
progress Query 644 ms (moto's Query is slow; it is one paged request
against DynamoDB), plan 9.7 ms, offset JSON 3.6 ms, partitions 7.1 ms.
The offset is 223 KiB because it lists all 5,000 drained ancestors that are
still within retention -- the first thing to shrink if offsets get large.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from kinesis_src.positions import Position
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import (
    BatchEnd,
    admit_ready,
    advance,
    lineage_rank,
    next_plan,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--open", type=int, default=1000)
    parser.add_argument("--ancestors", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()

    from moto import mock_aws

    from kinesis_src.aws.dynamodb import DynamoDBClient
    from kinesis_src.config import AwsSettings
    from kinesis_src.leases.progress import ProgressStore, ShardProgress
    from kinesis_src.leases.table import LeaseTable

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    t0 = time.perf_counter()
    graph = ShardGraph()
    graph.update(history(opts.open, opts.ancestors))
    graph.validate()
    build_s = time.perf_counter() - t0
    open_ids = graph.open_shards()
    closed = len(graph) - len(open_ids)
    print(f"lineage: {len(open_ids)} open shards, {closed} closed ancestors (graph built in {build_s:.2f}s)")

    drained = frozenset(s for s in graph.shard_ids() if not graph.is_open(s))
    plan = Plan(
        run="bench",
        batch=7,
        shards={s: ShardPlan(Position.after_sequence("100"), 1000) for s in open_ids},
        drained=drained,
    )
    with mock_aws():
        table = LeaseTable(DynamoDBClient(AwsSettings(region="us-east-1")), "bench-planning", "app", "orders")
        table.ensure_table()
        store = ProgressStore.of(table)
        progresses = [
            ShardProgress(s, Position.after_sequence("200"), records=100, stop_reason="caught_up") for s in open_ids
        ]
        for i in range(0, len(progresses), 100):
            store.record_many("bench", 7, progresses[i : i + 100])

        timings: dict[str, list[float]] = {k: [] for k in ("progress Query", "plan", "offset JSON", "partitions")}
        for _ in range(opts.repeat):
            t = time.perf_counter()
            recorded = store.read_batch("bench", 7)
            timings["progress Query"].append(time.perf_counter() - t)
            ends = {s: BatchEnd(p.end, p.records, p.shard_ended, p.stop_reason) for s, p in recorded.items()}

            t = time.perf_counter()
            frontier = admit_ready(advance(plan, ends), graph, preserve_order=True)
            nxt = next_plan(plan, frontier, {s: True for s in open_ids}, 1000, None, None)
            timings["plan"].append(time.perf_counter() - t)

            t = time.perf_counter()
            text = json.dumps(nxt.to_offset())
            timings["offset JSON"].append(time.perf_counter() - t)

            t = time.perf_counter()
            rank = lineage_rank(graph)
            ordered = sorted(nxt.read, key=lambda s: (rank[s], s))
            groups = [ordered[i : i + 4] for i in range(0, len(ordered), 4)]
            timings["partitions"].append(time.perf_counter() - t)
    assert len(groups) == opts.open // 4 + (1 if opts.open % 4 else 0)

    print(f"offset size: {len(text) / 1024:.0f} KiB (drained ancestors listed: {len(nxt.drained)})")
    print(f"{'step':<18}{'median ms':>11}")
    total = 0.0
    for step, values in timings.items():
        median = statistics.median(values) * 1000
        total += median
        print(f"{step:<18}{median:>11.1f}")
    print(f"{'total':<18}{total:>11.1f}")


if __name__ == "__main__":
    main()
