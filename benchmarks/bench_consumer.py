"""Benchmark: one consumer process reading a preloaded stream, three ways; and failover time.

Run inside the isolated namespace (it starts its own emulators)::

    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/bench_consumer.py

The async-kinesis comparison needs a separate virtualenv (it pins its own
aiobotocore/botocore, so it never goes into the project's .venv). The script
creates it on demand at $BENCH_ASYNC_KINESIS_VENV (default
/tmp/bench-asynckinesis, outside the repository); inside the isolated
namespace there is no network, so create it first::

    .venv/bin/python benchmarks/bench_consumer.py --setup-async-kinesis

1. Throughput. By default the stream is the replay endpoint
   (benchmarks/replay_endpoint.py, ``--source replay``): --shards x
   --records-per-shard (100,000) pre-encoded records of --size bytes served
   from a child process that stays far below the readers (its CPU is
   printed), so the readers are what is measured. ``--source kinesalite``
   preloads kinesalite instead (25,000 per shard; the emulator is then the
   bound, see the kinesalite run below). Each reader reads from TRIM_HORIZON
   to the last record, each run a fresh subprocess on the same data:

   * kinesis-src ``Consumer`` (asyncio, lease table on DynamoDB Local,
     ``await batch.checkpoint()`` after every batch, idle_interval_s=0.05,
     the default pacing within Kinesis' per-shard limits: 5 calls/s and
     2 MiB/s per shard, so 4 shards of 200 B records stop at ~42k records/s,
     as against AWS);
   * the same with pacing off (min interval 0, no byte budget): what the
     reader can do, not what it may do against one real 4-shard stream;
   * the same, pacing off, reading the page's columns (``batch.page.data``,
     what ``batch.to_arrow()`` reads) instead of building ``Record`` objects;
   * the last two with numpy unimportable (``nonumpy-*``: installed without
     the spark extra; the Consumer's decode, msgspec, does not use numpy,
     so these rows match the two above; a ``--before`` revision older than
     issue #24 decodes those pages with ``json.loads``);
   * a plain boto3 loop: GetRecords round-robin over the shards, Limit=10000,
     botocore's standard parser, no leases, no checkpoints;
   * async-kinesis (PyPI ``async-kinesis``) ``kinesis.Consumer`` with a raw
     bytes processor and its DynamoDB checkpointer (a checkpoint per batch);
     see benchmarks/async_kinesis_driver.py for every setting.

   ``--before REV`` also runs each Consumer reader of git revision REV
   (exported to a temporary directory, benchmarks/before_tree.py) beside
   the same reader of this tree, which of the two goes first alternating
   by round: "(before)" rows of the same run, then after/before ratios of
   CPU per record and records/s (medians, and each round's own ratio).

   Every reader touches every record the same way (``len(data)``).
   records/s and CPU are measured inside the reading process, from the end
   of its start-up (clients open, leases taken) to the last record:
   ``time.process_time()`` (all threads of the process). The server's own
   CPU over the same run comes from /proc. Each Consumer row also prints
   what the application waited for (``wait_batch_s``: the next batch;
   ``wait_checkpoint_s``: its checkpoints), the event loop's idle time in
   select (``loop_idle_s``), the loop's longest stall (``loop_stall_max_ms``:
   how late a task that asks to wake every 10 ms was, at worst) and the
   garbage collector's seconds and collections per generation (``gc_s``).
2. Failover after SIGKILL: two Consumer processes (failover_s=3, renew 1 s,
   scan 0.25 s) on a fresh 4-shard kinesalite stream with continuous small
   traffic; once the two share the shards (each holds some: the balancer
   weighs leases by measured throughput, so not always 2 + 2), one is
   SIGKILLed; the time is from the kill until the survivor has delivered a
   batch from every shard the dead worker held. With ``--before REV`` each
   round also runs REV's consumer_failover_worker.py (so REV's Consumer),
   alternating which goes first, then the after/before ratio of the times.

Part 1 on the replay endpoint: see docs/performance.md for the command, a
run and its reading. The run below is the earlier one on kinesalite
(``--source kinesalite``). About 1 min 25 s. Measured on the 2-core dev box (Python 3.11.7; kinesalite
and DynamoDB Local from npm; kinesis-src on aiobotocore 3.10 / botocore 1.43;
async-kinesis 3.0.1 on aiobotocore 2.25.1 / botocore 1.40.61), 4 x 25,000
records of 200 B, median of 3 rounds on an otherwise idle machine (single
rounds vary by up to +-20 % when anything else runs)::

    reader                               rec/s  CPU s/M  CPU%  kl CPU%  vs boto3       vs async-kinesis
                                                                        rate   CPU     rate   CPU
    boto3 GetRecords loop               24,548     16.4    40       64  1.00x  1.00x   1.37x  0.37x
    kinesis-src Consumer                35,966      6.4    23       99  1.47x  0.39x   2.01x  0.14x
    kinesis-src Consumer, pacing off    36,877      7.0    26       99  1.50x  0.42x   2.06x  0.16x
    async-kinesis Consumer              17,905     44.5    80       46  0.73x  2.71x   1.00x  1.00x

    an earlier run (same code): Consumer 38,202 rec/s = 1.51x boto3, 2.08x async-kinesis;
    CPU per record 0.42x boto3, 0.15x async-kinesis.
    kinesalite's ceiling (records / its CPU seconds): 33-41k rec/s.

    failover after SIGKILL (failover 3 s, renew 1 s, scan 0.25 s), kill -> a batch from
    every shard of the killed worker: min 2.28 s, median 2.29 s, max 3.22 s
    (an earlier run: 2.30 / 2.59 / 2.95 s).

    (Before a full page stopped counting as "caught up", kinesalite's constant
    MillisBehindLatest=0 made the Consumer idle after every page: 30,841 rec/s.)

Reading the numbers:

* kinesalite bounds the kinesis-src Consumer: node runs at 79-97 % of one
  core (it is single-threaded) while the reader uses 20 %; the best runs
  sit at kinesalite's ceiling, and turning pacing off buys nothing beyond
  it. The reader's 6.0-6.6 CPU s per million records (measured apart: 1.75 s
  decoding the bodies, 1.5 s building ``Record`` objects in
  ``batch.records``, which ``batch.page`` columns skip; the rest HTTP,
  signing, the event loop and the lease threads) would allow ~150k
  records/s per core against a faster endpoint.
  The default pacing keeps each shard within 2 MB/s (10,000 x 200 B per
  ~0.95 s), so 4 shards can not exceed ~42k records/s here anyway, as on
  real Kinesis.
* The boto3 loop waits for each response, then parses it with botocore's
  generic parser (14.7 CPU s/M, 2.3x the Consumer's): server time and parse
  time add up instead of overlapping.
* async-kinesis is bound by neither CPU nor kinesalite alone: cProfile shows
  its time in per-record asyncio work (``asyncio.wait_for`` around every
  record's ``queue.put`` and ``queue.get``, a task per call) and botocore's
  parser (a datetime per record), plus a fixed 0.2 s sleep per cycle of its
  single fetch task.
* Failover can be shorter than failover_s: expiry counts from the last
  heartbeat a survivor saw, which was up to one renewal (1 s) before the kill.
* kinesalite reports MillisBehindLatest 0 even on full pages, so the
  Consumer idles idle_interval_s after every call there (0.05 s here).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import before_tree
from bench_setup import REGION, bench_consumer, preload

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "localstack"))

ASYNC_KINESIS_VENV = Path(os.environ.get("BENCH_ASYNC_KINESIS_VENV", "/tmp/bench-asynckinesis"))
ASYNC_KINESIS_REQUIREMENT = "async-kinesis[dynamodb]"
RUN_TIMEOUT_S = 600.0  # async-kinesis reads 400,000 records at ~10k/s, and slower on a busy machine

FAILOVER = {"failover": 3.0, "renew": 1.0, "scan": 0.25, "idle": 0.1}

# -- async-kinesis virtualenv -------------------------------------------------------------------


def async_kinesis_python() -> Path:
    return ASYNC_KINESIS_VENV / "bin" / "python"


def async_kinesis_ready() -> bool:
    python = async_kinesis_python()
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import kinesis, kinesis.dynamodb, aioboto3"],
                           capture_output=True, text=True, check=False)
    return probe.returncode == 0


def setup_async_kinesis() -> str | None:
    """Create the separate virtualenv with async-kinesis; None when ready, else why not."""
    if async_kinesis_ready():
        return None
    if os.environ.get("KINESIS_SRC_ISOLATED") == "1":
        return (f"no usable virtualenv with async-kinesis at {ASYNC_KINESIS_VENV}, and this isolated namespace has "
                "no network to create one: run `.venv/bin/python benchmarks/bench_consumer.py "
                "--setup-async-kinesis` outside it first")
    print(f"creating a separate virtualenv for {ASYNC_KINESIS_REQUIREMENT} at {ASYNC_KINESIS_VENV} "
          "(it pins its own aiobotocore; the project's .venv is not touched) ...", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(ASYNC_KINESIS_VENV)],
        [str(async_kinesis_python()), "-m", "pip", "install", "-q", ASYNC_KINESIS_REQUIREMENT],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return f"`{' '.join(step)}` failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return None if async_kinesis_ready() else f"async-kinesis still not importable in {ASYNC_KINESIS_VENV}"


# -- readers (each runs in its own subprocess: `--run METHOD`) ----------------------------------------


class LoopIdle:
    """Seconds the event loop spent waiting in select (nothing ready): what is left of the wall time
    once the loop's own work is taken out. Installed on the running loop's selector."""

    def __init__(self) -> None:
        self.seconds = 0.0
        selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
        select = selector.select

        def timed(timeout: float | None = None) -> Any:
            t = time.perf_counter()
            try:
                return select(timeout)
            finally:
                self.seconds += time.perf_counter() - t

        selector.select = timed


class LoopStall:
    """The longest the event loop was busy between two turns, seen by a task that wakes every 10 ms:
    how late a task on the loop (the lease coordinator's heartbeat runs as one) can be."""

    TICK_S = 0.01

    def __init__(self) -> None:
        self.worst_s = 0.0
        self.late = 0  # ticks more than 100 ms late
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        clock = time.perf_counter
        while True:
            due = clock() + self.TICK_S
            await asyncio.sleep(self.TICK_S)
            late = clock() - due
            self.worst_s = max(self.worst_s, late)
            self.late += late > 0.1

    def stop(self) -> None:
        self._task.cancel()


class GcTime:
    """Seconds spent in the cyclic garbage collector, and collections, per generation (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._started
            self.collections[info["generation"]] += 1

    def mark(self) -> tuple[list[float], list[int]]:
        return list(self.seconds), list(self.collections)

    def since(self, mark: tuple[list[float], list[int]]) -> dict[str, Any]:
        seconds = [a - b for a, b in zip(self.seconds, mark[0])]
        return {"gc_s": round(sum(seconds), 3), "gc_s_by_generation": "/".join(f"{x:.3f}" for x in seconds),
                "gc_runs": "/".join(str(a - b) for a, b in zip(self.collections, mark[1]))}


async def read_with_consumer(args: argparse.Namespace, pacing_off: bool, columns: bool = False) -> dict[str, Any]:
    from kinesis_src.consumer import FetchPacing

    started = time.perf_counter()
    idle = LoopIdle()
    gc_time = GcTime()
    unpaced = {"pacing": FetchPacing(idle_interval_s=0.05, min_interval_s=0.0, bytes_per_second=1e12)}
    consumer = bench_consumer(args, f"bench-{uuid.uuid4().hex[:8]}", idle_interval_s=0.05,
                              **(unpaced if pacing_off else {}))
    records = nbytes = 0
    first = None
    waited = {"batch": 0.0, "checkpoint": 0.0}  # the application's view: what it waited for
    clock = time.perf_counter
    async with consumer:
        stall = LoopStall()
        t0, c0, idle0, m0 = clock(), time.process_time(), idle.seconds, time.thread_time()
        gc0 = gc_time.mark()
        batches = aiter(consumer)
        while records < args.expect:
            t = clock()
            batch = await anext(batches)
            waited["batch"] += clock() - t
            if first is None:
                first = clock() - t0
            if columns:  # the page's columns, as batch.to_arrow() reads them: no Record objects
                nbytes += sum(map(len, batch.page.data))
            else:
                for record in batch.records:
                    nbytes += len(record.data)
            records += len(batch)
            t = clock()
            await batch.checkpoint()
            waited["checkpoint"] += clock() - t
        seconds, cpu, loop_idle = clock() - t0, time.process_time() - c0, idle.seconds - idle0
        loop_cpu = time.thread_time() - m0  # the event loop's thread; the rest is lease and checkpoint threads
        checkpoints = consumer.metrics.checkpoints
        gc_used = gc_time.since(gc0)
        stall.stop()
    return {"records": records, "bytes": nbytes, "seconds": seconds, "cpu_s": cpu, "start_s": t0 - started,
            "first_record_s": first, "checkpoints": checkpoints,
            "wait_batch_s": round(waited["batch"], 3), "wait_checkpoint_s": round(waited["checkpoint"], 3),
            "loop_idle_s": round(loop_idle, 3), "loop_cpu_s": round(loop_cpu, 3),
            "loop_stall_max_ms": round(stall.worst_s * 1000, 1), "loop_ticks_late_100ms": stall.late, **gc_used}


def read_with_boto3(args: argparse.Namespace) -> dict[str, Any]:
    """What a user writes by hand: boto3, round-robin GetRecords over the shards."""
    import boto3

    started = time.perf_counter()
    client = boto3.client("kinesis", region_name=REGION, endpoint_url=args.endpoint)
    t0, c0 = time.perf_counter(), time.process_time()
    shards = [s["ShardId"] for s in client.list_shards(StreamName=args.stream)["Shards"]]
    iterators = {
        sid: client.get_shard_iterator(StreamName=args.stream, ShardId=sid, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"]
        for sid in shards
    }
    records = nbytes = calls = 0
    first = None
    while iterators and records < args.expect:
        for sid in list(iterators):
            out = client.get_records(ShardIterator=iterators[sid], Limit=10000)
            calls += 1
            got = out["Records"]
            if got and first is None:
                first = time.perf_counter() - t0
            for record in got:
                nbytes += len(record["Data"])
            records += len(got)
            if not got or out.get("NextShardIterator") is None:
                del iterators[sid]  # caught up (or closed)
            else:
                iterators[sid] = out["NextShardIterator"]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"records": records, "bytes": nbytes, "seconds": seconds, "cpu_s": cpu, "start_s": t0 - started,
            "first_record_s": first, "calls": calls}


def run_reader(args: argparse.Namespace) -> None:
    if args.run.startswith(WITHOUT_NUMPY):  # as installed without the spark extra: every page takes json.loads
        sys.modules["numpy"] = None  # type: ignore[assignment]  # `import numpy` raises ImportError
    if args.run == "boto3":
        result = read_with_boto3(args)
    else:
        result = asyncio.run(read_with_consumer(args, pacing_off=args.run != "consumer",
                                                columns=args.run.endswith("columns")))
    print(json.dumps({"method": args.run, **result}), flush=True)


# -- the parent: emulators, preload, measurements ---------------------------------------------------


def cpu_ticks(pid: int) -> float:
    """utime + stime of a process, in seconds (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(method: str, endpoint: str, dynamodb: str, stream: str, expect: int, server_pid: int,
            na_reason: str | None) -> dict[str, Any]:
    if method == "async-kinesis":
        if na_reason:
            return {"method": method, "error": na_reason}
        argv = [str(async_kinesis_python()), str(HERE / "async_kinesis_driver.py")]
    else:
        method_name, _, tree = method.partition(BEFORE)
        script = Path(tree) / "benchmarks" / "bench_consumer.py" if tree else Path(__file__).resolve()
        argv = [sys.executable, str(script), "--run", method_name]
    argv += ["--endpoint", endpoint, "--dynamodb", dynamodb, "--stream", stream, "--expect", str(expect)]
    server_cpu = cpu_ticks(server_pid)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"method": method, "error": f"did not read {expect} records within {RUN_TIMEOUT_S:.0f} s"}
    server_cpu = cpu_ticks(server_pid) - server_cpu
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["<no output>"])[-1]
        return {"method": method, "error": f"exit {done.returncode}: {tail}"}
    result = json.loads(lines[-1])
    result["method"] = method
    result["server_cpu_s"] = server_cpu
    if result["records"] != expect:
        result["error"] = f"read {result['records']} records, expected {expect}"
    return result


BEFORE = "@"
"""``consumer-nopacing@/tmp/x``: that reader, run by the bench_consumer.py of the tree at /tmp/x (``--before``)."""


def label(method: str) -> str:
    name, _, tree = method.partition(BEFORE)
    return f"{LABELS[name]} (before)" if tree else LABELS[name]


WITHOUT_NUMPY = "nonumpy"
"""Readers named so run with numpy unimportable (the Consumer then decodes every page with ``json.loads``)."""

LABELS = {  # also the order the readers run in, in each round
    "boto3": "boto3 GetRecords loop",
    "consumer": "kinesis-src Consumer",
    "consumer-nopacing": "kinesis-src Consumer, pacing off",
    "consumer-columns": "  the same, columns (batch.page)",
    "nonumpy-nopacing": "Consumer, pacing off, without numpy",
    "nonumpy-columns": "  the same, columns (batch.page)",
    "async-kinesis": "async-kinesis Consumer",
}


def print_table(best: dict[str, dict[str, Any]], server: str) -> None:
    base, other = best.get("boto3"), best.get("async-kinesis")

    def rate(r: dict[str, Any]) -> float:
        return r["records"] / r["seconds"]

    def cpu_per_record(r: dict[str, Any]) -> float:
        return r["cpu_s"] / r["records"] * 1e6

    def ratio(r: dict[str, Any], ref: dict[str, Any] | None, fn: Any) -> str:
        if ref is None or "error" in ref or "error" in r:
            return "n/a"
        return f"{fn(r) / fn(ref):.2f}x"

    print(f"   {'reader':<43}{'rec/s':>9}{'CPU us/rec':>11}{'CPU%':>6}{'srv CPU%':>9}{'start s':>8}"
          f"{'rate/boto3':>11}{'rate/ak':>9}{'CPU/boto3':>10}{'CPU/ak':>8}")
    for method, r in best.items():
        if "error" in r:
            print(f"   {label(method):<43}{'n/a':>9}   ({r['error']})")
            continue
        print(f"   {label(method):<43}{rate(r):>9,.0f}{cpu_per_record(r):>11.2f}"
              f"{100 * r['cpu_s'] / r['seconds']:>6.0f}{100 * r['server_cpu_s'] / r['seconds']:>9.0f}"
              f"{r['start_s']:>8.2f}{ratio(r, base, rate):>11}{ratio(r, other, rate):>9}"
              f"{ratio(r, base, cpu_per_record):>10}{ratio(r, other, cpu_per_record):>8}")
    print(f"   (CPU us/rec: CPU time of the reading process per record; CPU%: of one core, reader; "
          f"srv CPU%: the {server} over the same run; ratios: rec/s and CPU per record vs boto3 and vs "
          "async-kinesis (ak))")


def round_line(rnd: int, method: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return f"   round {rnd + 1} {label(method):<43} n/a: {result['error']}"
    extra = "".join(f"  {k} {result[k]}" for k in ("calls", "checkpoints", "wait_batch_s", "wait_checkpoint_s", "loop_idle_s",
                                                  "loop_cpu_s", "loop_stall_max_ms", "loop_ticks_late_100ms", "gc_s",
                                                  "gc_s_by_generation", "gc_runs")
                    if k in result)
    return (f"   round {rnd + 1} {label(method):<43} {result['records'] / result['seconds']:>8,.0f} rec/s "
            f"{result['seconds']:6.2f} s  CPU {result['cpu_s']:5.2f} s ({1e6 * result['cpu_s'] / result['records']:.2f}"
            f" us/rec)  server CPU {result['server_cpu_s']:5.2f} s  start {result['start_s']:.2f} s  first batch "
            f"after {result['first_record_s']:.2f} s{extra}")


def run_rounds(opts: argparse.Namespace, source: dict[str, Any], dynamodb: str, na_reason: str | None) -> None:
    """Every reader, ``opts.rounds`` times, each a fresh process on the same data; then the tables."""
    tree = opts.before_tree  # each Consumer reader of the old tree beside the same reader of this one
    pairs = [[m, f"{m}{BEFORE}{tree}"] if tree and m.startswith("consumer") else [m]
             for m in LABELS if m in opts.methods]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for pair in pairs for m in pair}
    for rnd in range(opts.rounds):
        for method in (m for pair in pairs for m in before_tree.in_turn(rnd, pair)):
            result = measure(method, source["endpoint"], dynamodb, source["stream"], source["expect"],
                             source["pid"], na_reason)
            runs[method].append(result)
            print(round_line(rnd, method, result), flush=True)
    for kind, pick in (("median", lambda good: good[len(good) // 2]), ("best", lambda good: good[-1])):
        chosen = {}
        for method, results in runs.items():
            good = sorted((r for r in results if "error" not in r), key=lambda r: r["records"] / r["seconds"])
            chosen[method] = pick(good) if good else results[-1]
        print(f"\n   {kind} of {opts.rounds} rounds (the run with the {kind} rec/s, per reader):")
        print_table(chosen, source["server"])
    print_cpu_per_round(runs)
    print_after_before(runs)
    ceiling = [r["records"] / r["server_cpu_s"] for rs in runs.values() for r in rs
               if "error" not in r and r["server_cpu_s"] > 0]
    if ceiling:
        print(f"   the {source['server']}'s own ceiling (records / its CPU seconds, i.e. at 100% of one core): "
              f"{min(ceiling):,.0f}-{max(ceiling):,.0f} rec/s")
    versions = next((r.get("version") for r in runs.get("async-kinesis", []) if r.get("version")), None)
    if versions:
        print(f"   async-kinesis environment: {versions}")


def print_cpu_per_round(runs: dict[str, list[dict[str, Any]]]) -> None:
    """CPU per record of every round, and their median: the tables pick a run by its rate, and on a
    shared box the rate varies ~2x between rounds while CPU per record varies ~±10 %."""
    print("\n   CPU us/rec in each round (median):")
    for method, results in runs.items():
        per_record = [1e6 * r["cpu_s"] / r["records"] for r in results if "error" not in r]
        if per_record:
            rounds = " / ".join(f"{x:.2f}" for x in per_record)
            print(f"   {label(method):<43}{rounds}  ({statistics.median(per_record):.2f})")


def print_after_before(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Each Consumer reader of this tree against the same reader of ``--before``: CPU per record and rec/s."""
    pairs = [(method.partition(BEFORE)[0], method) for method in runs if BEFORE in method]
    if not pairs:
        return

    def per_round(method: str, fn: Any) -> list[float | None]:  # None: a failed round
        return [None if "error" in r else fn(r) for r in runs[method]]

    def cpu(r: dict[str, Any]) -> float:
        return 1e6 * r["cpu_s"] / r["records"]

    def rate(r: dict[str, Any]) -> float:
        return r["records"] / r["seconds"]

    print("\n   after / before (medians of the rounds; each round's own ratio in brackets):")
    for after, before in pairs:
        print(f"   {label(after):<43}CPU us/rec {before_tree.ratio_text(per_round(after, cpu), per_round(before, cpu))}"
              f"   rec/s {before_tree.ratio_text(per_round(after, rate), per_round(before, rate), ',.0f')}")


def throughput_replay(opts: argparse.Namespace, dynamodb: str, na_reason: str | None) -> None:
    """Part 1 on the replay endpoint (benchmarks/replay_endpoint.py): the readers are the bound."""
    from replay_endpoint import ReplayEndpoint

    per_shard = opts.records_per_shard or 100_000
    t0 = time.perf_counter()
    with ReplayEndpoint(shards=opts.shards, records_per_shard=per_shard, size=opts.size, mode="process") as ep:
        expect = opts.shards * per_shard
        print(f"1. throughput: replay endpoint at {ep.endpoint_url} (built in {time.perf_counter() - t0:.1f} s): "
              f"{opts.shards} shards x {per_shard:,} records x {opts.size} B; {opts.rounds} rounds, each reader a "
              "fresh process", flush=True)
        source = {"endpoint": ep.endpoint_url, "stream": ep.stream_name, "expect": expect, "pid": ep.pid,
                  "server": "replay endpoint"}
        run_rounds(opts, source, dynamodb, na_reason)


def throughput_kinesalite(opts: argparse.Namespace, emulators: Any, na_reason: str | None) -> None:
    from kinesis_src import AwsSettings
    from kinesis_src.aws import KinesisClient

    endpoint, dynamodb = emulators.kinesalite_endpoint, emulators.dynamodb_endpoint
    kinesis = KinesisClient(AwsSettings(region=REGION, endpoint_url=endpoint))
    t0 = time.perf_counter()
    expect = preload(kinesis, "bench", opts.shards, opts.records_per_shard or 25_000, opts.size)
    print(f"1. throughput: preloaded {expect:,} records x {opts.size} B into {opts.shards} kinesalite shards "
          f"in {time.perf_counter() - t0:.1f} s; {opts.rounds} rounds, each reader a fresh process", flush=True)
    source = {"endpoint": endpoint, "stream": "bench", "expect": expect, "pid": emulators.pids["kinesalite"],
              "server": "kinesalite (node)"}
    run_rounds(opts, source, dynamodb, na_reason)


# -- failover -----------------------------------------------------------------------------------------


class Worker:
    """A consumer_failover_worker.py subprocess and the events it printed."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.held: list[str] = []
        self.held_history: list[tuple[float, list[str]]] = []
        self.batches: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if event["event"] == "held":
                    self.held = event["shards"]
                    self.held_history.append((event["t"], event["shards"]))
                elif event["event"] == "batch":
                    self.batches.append((event["t"], event["shard"]))

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr = (self.stderr + [line.rstrip()])[-20:]

    def holding(self) -> list[str]:
        with self.lock:
            return list(self.held)

    def delivered_after(self, t: float) -> set[str]:
        with self.lock:
            return {shard for when, shard in self.batches if when > t}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def failover_once(endpoint: str, dynamodb: str, shards: int, index: int, script: Path) -> tuple[float, float]:
    """Seconds from the SIGKILL until the survivor held, and until it delivered from, every shard of the victim;
    ``script`` is the consumer_failover_worker.py both processes run (this tree's or ``--before``'s)."""
    from kinesis_src import AwsSettings
    from kinesis_src.aws import KinesisClient

    stream, app = f"failover-{index}-{uuid.uuid4().hex[:6]}", f"failover-{uuid.uuid4().hex[:6]}"
    kinesis = KinesisClient(AwsSettings(region=REGION, endpoint_url=endpoint))
    kinesis.create_stream(stream, shards)
    kinesis.wait_active(stream)
    stop = threading.Event()

    def produce() -> None:  # continuous small traffic: 16 records every 50 ms, keys spread over all shards
        n = 0
        while not stop.wait(0.05):
            kinesis.put_records(stream, [(f"k-{n + i}", b"x" * 100) for i in range(16)])
            n += 16

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()

    def argv(name: str) -> list[str]:
        return [sys.executable, str(script), "--worker", name, "--stream", stream,
                "--application", app, "--endpoint", endpoint, "--dynamodb", dynamodb,
                *[f"--{k}={v}" for k, v in FAILOVER.items()]]

    victim = Worker("a", argv("a"))
    survivor: Worker | None = None
    try:
        wait_for(lambda: len(victim.holding()) == shards, 60, "worker a never held every shard")
        survivor = Worker("b", argv("b"))

        def split() -> bool:  # each holds some, none held twice; not necessarily 2 + 2: the balancer
            a, b = set(victim.holding()), set(survivor.holding())  # weighs leases by measured throughput
            return bool(a) and bool(b) and not a & b and len(a | b) == shards

        wait_for(split, 60, "the two workers never split the shards between them")
        taken = victim.holding()
        time.sleep(1.0)  # both reading steadily
        killed_at = time.monotonic()
        victim.process.kill()  # SIGKILL: no release, no last heartbeat
        victim.process.wait()
        wait_for(lambda: set(taken) <= survivor.delivered_after(killed_at), 60,
                 f"survivor never delivered from every shard of the killed worker ({taken})")
        latest = {}
        with survivor.lock:
            for when, shard in survivor.batches:
                if when > killed_at and shard in taken and shard not in latest:
                    latest[shard] = when

        def lease_times() -> list[float]:
            with survivor.lock:  # type: ignore[union-attr]
                return [t for t, held in survivor.held_history if t > killed_at and set(taken) <= set(held)]

        # held_history is polled every 50 ms, so it may trail the first batch a little
        wait_for(lambda: bool(lease_times()), 10, "survivor's held list never showed the taken shards")
        took = lease_times()[0]
        return took - killed_at, max(latest.values()) - killed_at
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; worker stderr tails: a={victim.stderr[-3:]} "
                           f"b={survivor.stderr[-3:] if survivor else None}") from None
    finally:
        stop.set()
        producer.join()
        for worker in (victim, survivor):
            if worker is not None:
                worker.stop()


def failover(opts: argparse.Namespace, emulators: Any) -> None:
    settings = ", ".join(f"{k}={v} s" for k, v in FAILOVER.items())
    print(f"\n2. failover after SIGKILL: 2 Consumer processes, {opts.failover_shards} kinesalite shards, "
          f"DynamoDB Local lease table, {settings} (idle = idle_interval_s); traffic 320 records/s", flush=True)
    workers = {"": HERE / "consumer_failover_worker.py"}  # label suffix -> the worker script of that tree
    if opts.before_tree:
        workers[" (before)"] = opts.before_tree / "benchmarks" / "consumer_failover_worker.py"
    times: dict[str, list[tuple[float, float] | None]] = {side: [] for side in workers}  # None: a failed round
    for i in range(opts.failover_rounds):
        for side in before_tree.in_turn(i, list(workers)):
            try:
                took, seconds = failover_once(emulators.kinesalite_endpoint, emulators.dynamodb_endpoint,
                                              opts.failover_shards, i, workers[side])
            except TimeoutError as exc:
                times[side].append(None)
                print(f"   round {i + 1}{side}: failed: {exc}", flush=True)
                continue
            times[side].append((took, seconds))
            print(f"   round {i + 1}{side}: {seconds:.2f} s from the kill to a batch from every shard of the killed "
                  f"worker (leases held after {took:.2f} s)", flush=True)
    for side, results in times.items():
        done = [t[1] for t in results if t is not None]
        if done:
            print(f"   kill -> batch from every shard{side}: min {min(done):.2f} s, median "
                  f"{statistics.median(done):.2f} s, max {max(done):.2f} s ({len(done)} of {len(results)} rounds)")
    print("   (expiry is failover_s after the last heartbeat seen, which was up to renew before the kill)")
    if opts.before_tree:
        after, before = times[""], times[" (before)"]
        for what, k in (("kill -> batch from every shard", 1), ("kill -> leases held", 0)):
            seconds_after, seconds_before = ([None if t is None else t[k] for t in ts] for ts in (after, before))
            print(f"   after / before, {what} (s): {before_tree.ratio_text(seconds_after, seconds_before)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--records-per-shard", type=int, default=None,
                        help="default 100,000 on the replay endpoint, 25,000 on kinesalite (slow to preload)")
    parser.add_argument("--source", choices=["replay", "kinesalite"], default="replay",
                        help="what part 1 reads: the fast replay endpoint (default) or kinesalite")
    parser.add_argument("--methods", default=",".join(LABELS),
                        help="comma-separated readers of part 1")
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--before", metavar="REV",
                        help="also run each Consumer reader and the failover worker of this git revision, "
                             "as '(before)' rows of the same run, with after/before ratios")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failover-rounds", type=int, default=3)
    parser.add_argument("--failover-shards", type=int, default=4)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--setup-async-kinesis", action="store_true",
                        help=f"create the async-kinesis virtualenv at {ASYNC_KINESIS_VENV} and exit")
    # internal: one reader run in this subprocess
    parser.add_argument("--run", choices=["consumer", "consumer-nopacing", "consumer-columns", "nonumpy-nopacing",
                                          "nonumpy-columns", "boto3"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--dynamodb", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    opts.methods = opts.methods.split(",")
    if opts.run:
        run_reader(opts)
        return
    if opts.setup_async_kinesis:
        reason = setup_async_kinesis()
        print(reason or f"async-kinesis ready in {ASYNC_KINESIS_VENV}")
        sys.exit(1 if reason else 0)

    import launcher

    opts.before_tree = before_tree.export(ROOT, opts.before) if opts.before else None
    if opts.before_tree:
        print(f"'before' rows: {opts.before}'s readers and failover worker (exported to {opts.before_tree})")
    wants_ak = "async-kinesis" in opts.methods and not opts.skip_throughput
    na_reason = setup_async_kinesis() if wants_ak else None
    kinesalite = opts.source == "kinesalite" or not opts.skip_failover
    with launcher.Emulators(kinesis=False, dynamodb=True, kinesalite=kinesalite) as emulators:
        os.environ.update(emulators.env())
        print(f"DynamoDB Local at {emulators.dynamodb_endpoint}"
              + (f", kinesalite at {emulators.kinesalite_endpoint}" if kinesalite else "") + "\n", flush=True)
        started = time.perf_counter()
        if not opts.skip_throughput and opts.source == "replay":
            throughput_replay(opts, emulators.dynamodb_endpoint, na_reason)
        elif not opts.skip_throughput:
            throughput_kinesalite(opts, emulators, na_reason)
        if not opts.skip_failover:
            failover(opts, emulators)
        print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
