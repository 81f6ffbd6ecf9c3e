"""Benchmark: the lease protocol beyond one machine, by discrete-event simulation (issue #12 target 7).

The real LeaseCoordinator, LeaseTable, schema, assignment, DynamoDBClient
and retry policy run unchanged over a simulated DynamoDB (5-10 ms per
request, per-partition-key throttling at 3,000 RCU / 1,000 WCU, capacity
charged by item size) in simulated time; see tests/lease_sim/. Phases:

    start   W workers start at once on N unowned leases
    steady  nothing changes for 30 s (the steady-state request rate)
    leave   K workers stop gracefully (release their leases)
    join    K new workers start
    crash   K workers are killed (never heard from again)
    pause   one worker is paused for failover + 5 s, then resumes

Each phase runs until every running worker holds floor/ceil(N/W) leases,
every lease is held once, and nothing moved for three renewal intervals;
convergence is the last move minus the phase's start. The safety checker
looks after every step of every worker (see tests/lease_sim/safety.py).

Run::

    .venv/bin/python benchmarks/sim_leases.py                       # 1,000 shards / 10 workers
    .venv/bin/python benchmarks/sim_leases.py --shards 10000 --workers 100 --memo-decode
    # a proxy of 10,000 / 100 at a tenth of the wall time: its lease-read gap (5.7 s) forced on a smaller fleet
    .venv/bin/python benchmarks/sim_leases.py --shards 2000 --workers 40 --warm --memo-decode --quiet-logs \
        --timeout 60 --phases start,crash,join,leave --read-gap 5.7 --seed 2

``--memo-decode`` caches LeaseCodec.lease per stored item version (a pure
function of an immutable item: same outcomes, less wall time); the real
decode cost per scan is printed separately.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinesis_src.leases.schema.lease_items import LeaseCodec
from kinesis_src.leases.timing import LeaseTiming
from tests.lease_sim import PhaseResult, SimConfig, Simulation
from tests.lease_sim.safety import AFTER_EXPIRY, FORCED_STEAL, LIVE_OWNER, OTHER

_OPS = ("Query", "UpdateItem", "PutItem", "DeleteItem", "GetItem", "TransactWriteItems")


def main() -> None:
    args = _parse()
    logging.basicConfig(level=logging.CRITICAL if args.quiet_logs else logging.ERROR)
    timing = (FixedReadGap(failover_s=args.failover, read_gap_s=args.read_gap) if args.read_gap
              else LeaseTiming(failover_s=args.failover))
    config = SimConfig(
        shards=args.shards, workers=args.workers, seed=args.seed, timing=timing,
        memo_decode=args.memo_decode, phase_timeout_s=args.timeout, warm=args.warm,
        lease_partitions=args.lease_partitions or None,
    )
    k = args.change or max(1, args.workers // 10)
    wall = time.perf_counter()
    with Simulation(config) as sim:
        if args.progress:
            sim.progress = _progress(args.progress, wall)
        _run(sim, args, k, timing)
    wall = time.perf_counter() - wall
    _print(sim, args, k, wall)


@dataclass(frozen=True)
class FixedReadGap(LeaseTiming):
    """Lease reads forced ``read_gap_s`` apart whatever the fleet: a small fleet that reads its leases as
    seldom as 10,000 shards x 100 workers do (5.7 s), so their races show at a fraction of the cost."""

    read_gap_s: float = 0.0

    def lease_read_gap_s(self, leases: int, workers: int, partitions: int = 1) -> float:
        return self.read_gap_s


def _run(sim: Simulation, args: argparse.Namespace, k: int, timing: LeaseTiming) -> None:
    phases = args.phases.split(",")
    for name in phases:
        started = time.perf_counter()
        if name == "start":
            sim.phase("start", lambda: sim.start_workers(args.workers))
        elif name == "steady":
            sim.phase("steady", lambda: None, duration_s=args.steady)
        elif name == "leave":
            sim.phase(f"leave {k}", lambda: [w.leave() for w in sim.running()[:k]])
        elif name == "join":
            sim.phase(f"join {k}", lambda: sim.start_workers(k))
        elif name == "crash":
            sim.phase(f"crash {k}", lambda: [w.crash() for w in sim.running()[-k:]])
        elif name == "pause":
            sim.phase("pause 1", lambda: sim.running()[0].pause(timing.failover_s + 5))
        else:
            raise SystemExit(f"unknown phase {name!r}")
        last = sim.phases[-1]
        print(f"  ... {last.name}: converged {_conv(last)} (wall {time.perf_counter() - started:.0f} s)", flush=True)


def _progress(every_s: float, started: float) -> Callable[[Simulation], None]:
    """A line every ``every_s`` simulated seconds: how fast the simulation runs, and where it is."""
    state = {"next": 0.0}

    def report(sim: Simulation) -> None:
        if sim.queue.now < state["next"]:
            return
        state["next"] = sim.queue.now + every_s
        second = sim.ledger.seconds.get(int(sim.queue.now) - 1)
        held = sorted(len(w.coordinator.held()) for w in sim.running())
        print(f"    t={sim.queue.now:6.1f}s wall={time.perf_counter() - started:5.0f}s events={sim.queue.processed} "
              f"last second: {sum(second.requests.values()) if second else 0} req, "
              f"{sum(second.throttled.values()) if second else 0} throttled, "
              f"{second.rcu if second else 0:.0f} RCU, {second.wcu if second else 0:.0f} WCU; "
              f"held min/max {held[0] if held else 0}/{held[-1] if held else 0}, sum {sum(held)}; "
              f"safety: {len(sim.checker.violations)} violations", flush=True)

    return report


def _conv(phase: PhaseResult) -> str:
    return "no (timeout)" if phase.converged_after_s is None else f"{phase.converged_after_s:.1f} s"


def _print(sim: Simulation, args: argparse.Namespace, k: int, wall: float) -> None:
    t = sim.config.timing
    print(f"\nlease protocol simulation: {args.shards} shards, {args.workers} workers (+/-{k}), seed {args.seed}"
          f"{', warm start (table balanced, workers adopt)' if args.warm else ', cold start (all leases free)'}")
    print(f"timing: failover {t.failover_s:g} s, renew {t.renew_s:.2f} s, scan {t.scan_s:.2f} s; "
          f"DynamoDB {sim.config.latency_s[0] * 1000:g}-{sim.config.latency_s[1] * 1000:g} ms, "
          f"{sim.config.rcu_per_key:g} RCU / {sim.config.wcu_per_key:g} WCU per partition key; "
          f"leases over {sim.layout.partitions} partition key(s)\n")
    print(f"{'phase':<10}{'W':>4}{'converged':>13}{'sim s':>7}{'req/s':>8}{'RCU/s':>8}{'peak':>7}{'WCU/s':>7}"
          f"{'peak':>7}{'thr/s':>7}{'failed':>7}  moves")
    for p in sim.phases:
        thr = sum(p.throttled.values())
        moves = ", ".join(f"{v} {key}" for key, v in p.moves.items() if v)
        print(f"{p.name:<10}{p.running_workers:>4}{_conv(p):>13}{p.duration_s:>7.0f}{p.per_s(p.request_total):>8.0f}"
              f"{p.per_s(p.rcu):>8.0f}{p.peak_rcu_per_s:>7.0f}{p.per_s(p.wcu):>7.0f}{p.peak_wcu_per_s:>7.0f}"
              f"{p.per_s(thr):>7.1f}{p.failed_cycles:>7}  {moves or '-'}")
    print(f"\n{'phase':<10}{'lost takes':>12}{'false deaths':>14}{'hottest key RCU/s':>19}{'WCU/s':>7}")
    for p in sim.phases:
        won = p.moves.get("acquired", 0) + p.moves.get("stolen", 0)
        lost = p.moves.get("lost race", 0)
        share = f"{lost / (won + lost):.0%}" if won + lost else "-"
        print(f"{p.name:<10}{f'{lost} ({share})':>12}{_false_deaths(sim, p):>14}"
              f"{p.per_s(p.hottest_key_rcu):>19.0f}{p.per_s(p.hottest_key_wcu):>7.0f}")
    print("\nrequests per second by operation [throttled, failed condition]:")
    for p in sim.phases:
        parts = [f"{op} {p.per_s(p.requests.get(op, 0)):.1f} [{p.per_s(p.throttled.get(op, 0)):.1f}, "
                 f"{p.per_s(p.failed_conditions.get(op, 0)):.1f}]" for op in _OPS if p.requests.get(op)]
        print(f"  {p.name:<10}" + ", ".join(parts))
    c = sim.checker
    steals = c.count(["two holders"], [FORCED_STEAL])
    bugs = c.count(["two holders"], [AFTER_EXPIRY, OTHER])
    live = c.count(["two holders"], [LIVE_OWNER])
    fresh = sum(1 for v in c.violations if v.both_fresh)
    counters = c.count(["counter went back", "owner changed, counter did not"])
    verdict = "SAFE" if c.safe else "SAFE except forced-steal windows" if c.safe_but_steals else "VIOLATED"
    print(f"\nsafety: {c.checks} looks at held(), {c.writes_checked} lease writes checked -> "
          f"{live} overlaps taken from a live owner (not a steal), {bugs} after expiry or release, "
          f"{counters} counter faults, {steals} forced-steal "
          f"overlaps ({fresh} with both views fresh; longest {c.longest_overlap_s(FORCED_STEAL):.2f} s): {verdict}")
    by_how: dict[str, int] = {}
    for v in c.violations:
        by_how[v.how] = by_how.get(v.how, 0) + 1
    print(f"  overlaps by how: {by_how or 'none'}; longest {c.longest_overlap_s():.2f} s")
    for v in c.violations[:10]:
        print(f"  t={v.at:.3f} {v.kind} ({v.how}) {v.shard_id}: {v.detail}")
    print(f"wall time {wall:.0f} s for {sim.queue.now:.0f} simulated s ({sim.queue.processed} events); "
          f"decode memo {'on' if args.memo_decode else 'off'}")
    print(f"real decode of one scan ({args.shards} lease items, LeaseCodec.lease): {_decode_ms(sim):.0f} ms CPU")


def _false_deaths(sim: Simulation, phase: PhaseResult) -> int:
    """Workers declared dead in a phase where none crashed or paused: all live, so every one is false."""
    if phase.name.startswith(("crash", "pause")):
        return 0
    return phase.moves.get("declared dead", 0)


def _decode_ms(sim: Simulation) -> float:
    codec = LeaseCodec(sim.table_name)
    items = [i for p in sim.layout.lease_partitions() for i in sim.table.items(p) if "shardId" in i]
    started = time.process_time()
    for item in items:
        codec.lease(item)
    return (time.process_time() - started) * 1000


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--change", type=int, default=0, help="workers that leave/join/crash (default W/10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--failover", type=float, default=10.0)
    parser.add_argument("--steady", type=float, default=30.0, help="length of the steady phase (s)")
    parser.add_argument("--timeout", type=float, default=300.0, help="simulated seconds a phase may take")
    parser.add_argument("--phases", default="start,steady,leave,join,crash,pause")
    parser.add_argument("--memo-decode", action="store_true")
    parser.add_argument("--lease-partitions", type=int, default=0,
                        help="partition keys of the leases (default: one per 1,000 shards, as a shard sync records)")
    parser.add_argument("--warm", action="store_true",
                        help="start on a table already balanced over the W workers (a restart): they adopt")
    parser.add_argument("--read-gap", type=float, default=0.0,
                        help="force lease reads this many s apart (a proxy of a larger fleet's gap; 0: as scaled)")
    parser.add_argument("--progress", type=float, default=0.0, help="print a line every this many simulated s")
    parser.add_argument("--quiet-logs", action="store_true", help="hide the retry warnings")
    return parser.parse_args()


if __name__ == "__main__":
    main()
