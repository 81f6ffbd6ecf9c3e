"""Benchmark: enhanced fan-out (SubscribeToShard) against polling (GetRecords) on one LocalStack.

Run inside the isolated namespace (it starts its own LocalStack and DynamoDB Local)::

    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/bench_efo.py

LocalStack (host mode, ``localstack/localstack_host.py``) is the only local
endpoint that serves SubscribeToShard to botocore; install it first, outside
the namespace (``make localstack-host``). The lease tables of the Consumer
rows live on DynamoDB Local (``localstack/launcher.py``).

Readers, each run in a fresh subprocess against the same LocalStack:

* ``polling``: kinesis-src ``Consumer`` (default ``consumer_mode="polling"``,
  default pacing: idle_interval_s=1.0, at most 5 GetRecords/s and 2 MB/s per
  shard), ``await batch.checkpoint()`` after every batch, ``batch.records``;
* ``polling-0.2``: the same with idle_interval_s=0.2 (latency part only: the
  fastest a polling reader may ask an idle shard on AWS, 5 calls/s, and that
  budget is shared by every polling application of the shard);
* ``efo``: the same ``Consumer`` with ``consumer_mode="efo"`` (its own
  registered stream consumer, named after the application, deregistered on
  close, after the measured window: a stream allows 20);
* ``raw-efo``: the floor: ``kinesis_src.aws.AsyncFanOut.subscribe`` on every
  shard, resubscribing from the continuation, no leases, no checkpoints,
  ``len(data)`` on the page's columns.

1. Throughput: a --shards stream preloaded with --records-per-shard records
   of --size bytes, read from TRIM_HORIZON to the last record, --rounds
   rounds. records/s and CPU from the end of the reader's start-up (clients
   open, leases taken, consumer registered) to the last record, CPU as the
   reading process's ``time.process_time()``; LocalStack's (Python) and its
   kinesis-mock's (node) CPU over the same run from /proc.
2. Put-to-delivery latency: for each reader a fresh --shards stream; the
   reader starts at TRIM_HORIZON, warm-up records are put under many keys,
   and once the reader has seen one from every shard a producer (this
   process) puts --rate records/s for --duration s (one PutRecords every
   --put-interval s: one call through LocalStack takes ~35-60 ms, too slow
   for a call per record), each record carrying ``time.time()`` taken just
   before its call; the reader takes ``time.time()`` when the batch reaches
   the application. p50 / p95 / max over every record, and p50 / p95 from
   the call's return ("ack"), which a producer slowed down by the reader's
   load on LocalStack does not inflate.
3. The EFO / polling ratios of both.
4. In this process, no server: one page of records decoded as a
   SubscribeToShardEvent (botocore's event parser, what ``AsyncFanOut``
   gets) and as a GetRecords body (kinesis-src's fast decode).

The preload is small because kinesis-mock's puts slow down quadratically with
the records already in a shard (4 x 10,000 took 260 s here; 4 x 2,500 ~20 s).
About 2.5-3 minutes in all. LocalStack is the system measured here: its
SubscribeToShard is a Python loop over kinesis-mock's GetRecords that sleeps
1 s whenever a poll finds nothing, and kinesis-mock's GetRecords is the
slowest step of every read.

Numbers and how to read them: docs/performance.md, "Enhanced fan-out vs
polling on LocalStack".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench_setup import REGION, bench_consumer, preload

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "localstack"))

RUN_TIMEOUT_S = 120.0

LABELS = {
    "polling": "Consumer, polling",
    "polling-0.2": "Consumer, polling, idle 0.2 s",
    "efo": "Consumer, EFO",
    "raw-efo": "AsyncFanOut.subscribe loop",
}
THROUGHPUT_METHODS = ["polling", "efo", "raw-efo"]
LATENCY_METHODS = ["polling", "polling-0.2", "efo", "raw-efo"]

# -- readers (each runs in its own subprocess: `--run METHOD`) ------------------------------------


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class Tally:
    """What a reader saw: the throughput count, or the latency of each timed record."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.latency = args.latency
        self.expect = args.expect
        self.shards = args.shards
        self.records = 0
        self.nbytes = 0
        self.first: float | None = None
        self.latencies: dict[int, float] = {}  # record number -> seconds from its put to its first delivery
        self.warm_shards: set[str] = set()
        self.warm_at: float | None = None
        self.warm_cpu: float | None = None
        self.done_sent = False

    def take(self, shard_id: str, data: list[bytes] | Any) -> None:
        """One delivered page of ``shard_id``; ``data`` the records' payloads."""
        now = time.time()
        if self.first is None:
            self.first = time.perf_counter()
        for payload in data:
            self.nbytes += len(payload)
            if not self.latency:
                continue
            if payload[:1] == b"W":
                if self.warm_at is None:
                    self.warm_shards.add(shard_id)
                    if len(self.warm_shards) >= self.shards:
                        self.warm_at, self.warm_cpu = time.perf_counter(), time.process_time()
                        emit("warm")
                continue
            number, put_at = payload[1:].split(b":")
            self.latencies.setdefault(int(number), now - float(put_at))
        self.records += len(data)
        if self.done and not self.done_sent:
            self.done_sent = True
            emit("done")  # the parent samples the servers' CPU here, before the reader's clean-up

    @property
    def done(self) -> bool:
        return len(self.latencies) >= self.expect if self.latency else self.records >= self.expect


async def read_with_consumer(args: argparse.Namespace) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if args.run == "efo":  # deregistered on close (after the measured window): streams keep < 20 consumers
        extra.update(consumer_mode="efo", require_consumer_deregistration=True)
    if args.run == "polling-0.2":
        extra["idle_interval_s"] = 0.2
    started = time.perf_counter()
    consumer = bench_consumer(args, f"bench-{args.run.replace('.', '')}-{uuid.uuid4().hex[:8]}", **extra)
    tally = Tally(args)
    async with consumer:
        t0, c0 = time.perf_counter(), time.process_time()
        emit("ready")
        async for batch in consumer:
            tally.take(batch.shard_id, [record.data for record in batch.records])
            await batch.checkpoint()
            if tally.done:
                break
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {**result_of(tally, t0, c0, seconds, cpu), "start_s": t0 - started}


async def read_with_fanout(args: argparse.Namespace) -> dict[str, Any]:
    """The no-overhead EFO floor: one subscription per shard, resubscribed from its continuation."""
    from kinesis_src import AwsSettings, Position
    from kinesis_src.aws import AsyncFanOut, KinesisClient
    from kinesis_src.aws.async_kinesis import AsyncKinesisClient

    started = time.perf_counter()
    settings = AwsSettings(region=REGION, endpoint_url=args.endpoint)
    sync = KinesisClient(settings)
    stream_arn = sync.describe_stream(args.stream).arn
    shards = [s["ShardId"] for s in sync.list_shards(args.stream)]
    tally = Tally(args)
    finished = asyncio.Event()
    subscriptions = 0

    async def follow(fanout: AsyncFanOut, consumer_arn: str, shard_id: str) -> None:
        nonlocal subscriptions
        position = Position.trim_horizon()
        while True:
            subscriptions += 1
            async for event in fanout.subscribe(consumer_arn, shard_id, position):
                tally.take(shard_id, event.page.data)
                if tally.done:
                    finished.set()
                    return
                if event.shard_ended:
                    return
                if event.continuation_sequence_number not in (None, "0"):
                    position = Position.after_sequence(event.continuation_sequence_number)

    async with AsyncKinesisClient(settings) as kinesis:
        fanout = AsyncFanOut(kinesis)
        consumer = await fanout.register_consumer(stream_arn, f"bench-raw-{uuid.uuid4().hex[:8]}")
        t0, c0 = time.perf_counter(), time.process_time()
        emit("ready")
        tasks = [asyncio.create_task(follow(fanout, consumer.arn, shard)) for shard in shards]
        waiter = asyncio.create_task(finished.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        while not finished.is_set():  # a task ended (shard end) or failed; the others go on
            failed = [t for t in tasks if t.done() and t.exception() is not None]
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
            if all(t.done() for t in tasks):
                break
            await asyncio.wait([waiter, *[t for t in tasks if not t.done()]], return_when=asyncio.FIRST_COMPLETED)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        for task in [waiter, *tasks]:
            task.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)
        await fanout.deregister_consumer(consumer.arn)
    return {**result_of(tally, t0, c0, seconds, cpu), "start_s": t0 - started, "subscriptions": subscriptions}


def result_of(tally: Tally, t0: float, c0: float, seconds: float, cpu: float) -> dict[str, Any]:
    """The reader's figures; ``t0``/``c0`` start the window, which lasted ``seconds`` and used ``cpu``.

    The latency part's window runs from the warm-up's end to the last timed record (the reader's
    clean-up, e.g. a deregistration, comes after).
    """
    out: dict[str, Any] = {"records": tally.records, "bytes": tally.nbytes, "seconds": seconds, "cpu_s": cpu,
                           "first_s": None if tally.first is None else tally.first - t0}
    if tally.latency:
        warm_at = tally.warm_at if tally.warm_at is not None else t0
        warm_cpu = tally.warm_cpu if tally.warm_cpu is not None else c0
        out.update(timed=len(tally.latencies), window_s=t0 + seconds - warm_at, window_cpu_s=c0 + cpu - warm_cpu,
                   latencies=sorted(tally.latencies.items()))
    return out


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return None
    rank = max(1, -(-len(values) * pct // 100))
    return values[int(rank) - 1]


def run_reader(args: argparse.Namespace) -> None:
    if args.run == "raw-efo":
        result = asyncio.run(read_with_fanout(args))
    else:
        result = asyncio.run(read_with_consumer(args))
    emit("result", method=args.run, **result)


# -- the parent: servers, CPU, preload, producer --------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds, from /proc; 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """Every descendant of ``pid`` (kinesis-mock's node runs under LocalStack, in its own process group)."""
    parent: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parent.setdefault(ppid, []).append(int(entry.name))
    found, pending = [], list(parent.get(pid, ()))
    while pending:
        child = pending.pop()
        found.append(child)
        pending.extend(parent.get(child, ()))
    return found


class ServerCpu:
    """CPU seconds of LocalStack (Python: gateway, provider, SubscribeToShard loops) and of its kinesis-mock."""

    def __init__(self, localstack_pid: int) -> None:
        self.localstack = localstack_pid
        self.kinesis_mock = children_of(localstack_pid)

    def sample(self) -> tuple[float, float]:
        return cpu_seconds(self.localstack), sum(cpu_seconds(pid) for pid in self.kinesis_mock)


class Reader:
    """A reader subprocess; its JSON lines arrive on a queue (stdout read by a thread)."""

    def __init__(self, method: str, opts: argparse.Namespace, endpoint: str, dynamodb: str, stream: str,
                 expect: int, latency: bool) -> None:
        argv = [sys.executable, str(Path(__file__).resolve()), "--run", method, "--endpoint", endpoint,
                "--dynamodb", dynamodb, "--stream", stream, "--expect", str(expect), "--shards", str(opts.shards)]
        if latency:
            argv.append("--latency")
        self.method = method
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))
        self.events.put({"event": "exit"})

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr = (self.stderr + [line.rstrip()])[-30:]

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {event!r} from the {self.method} reader within {timeout:.0f} s") from None
            if got["event"] == event:
                return got
            if got["event"] == "exit":
                self.process.wait()
                tail = next((line for line in reversed(self.stderr) if line.strip()), "<no output>")
                raise RuntimeError(f"the {self.method} reader exited {self.process.returncode} before {event!r}: "
                                   f"{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def measure_throughput(method: str, opts: argparse.Namespace, servers: Any, stream: str,
                       expect: int) -> dict[str, Any]:
    reader = Reader(method, opts, servers.endpoint, servers.dynamodb, stream, expect, latency=False)
    try:
        reader.wait_for("ready", RUN_TIMEOUT_S)
        ls0, km0 = servers.cpu.sample()
        reader.wait_for("done", RUN_TIMEOUT_S)
        ls1, km1 = servers.cpu.sample()
        result = reader.wait_for("result", RUN_TIMEOUT_S)
    except (TimeoutError, RuntimeError) as exc:
        return {"method": method, "error": str(exc)}
    finally:
        reader.stop()
    # The servers' CPU window is the reader's, from its "ready" line to its "done" line.
    result.update(ls_cpu_s=ls1 - ls0, km_cpu_s=km1 - km0)
    if result["records"] < expect:
        result["error"] = f"read {result['records']} records, expected {expect}"
    return result


def produce(kinesis: Any, stream: str, count: int, rate: float, interval: float) -> tuple[float, list[float]]:
    """Put ``count`` records at ``rate``/s, one PutRecords of rate x interval records every ``interval`` s.

    Each record carries ``time.time()`` taken just before its PutRecords call. One call through
    LocalStack takes ~35-60 ms here, so one PutRecord per record could not keep 50/s. Returns
    the seconds it took and, per record, the duration of the call that put it.
    """
    per_call = max(1, round(rate * interval))
    started = time.perf_counter()
    calls: list[float] = []
    sent = 0
    while sent < count:
        delay = started + sent / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        n = min(per_call, count - sent)
        t0 = time.perf_counter()
        stamp = time.time()
        kinesis.put_records(stream, [(f"k-{sent + j}", f"L{sent + j}:{stamp:.6f}".encode()) for j in range(n)])
        calls.extend([time.perf_counter() - t0] * n)
        sent += n
    return time.perf_counter() - started, calls


def measure_latency(method: str, opts: argparse.Namespace, servers: Any, index: int) -> dict[str, Any]:
    kinesis = servers.kinesis
    stream = f"latency-{index}-{method.replace('.', '')}"
    kinesis.create_stream(stream, opts.shards)
    kinesis.wait_active(stream)
    count = int(opts.rate * opts.duration)
    reader = Reader(method, opts, servers.endpoint, servers.dynamodb, stream, count, latency=True)
    try:
        reader.wait_for("ready", RUN_TIMEOUT_S)
        # Warm-up: records under many keys, so every shard gets some; the timed part starts once the
        # reader has seen one from each shard (subscriptions open, leases held).
        kinesis.put_records(stream, [(f"warm-{i}", b"W") for i in range(16 * opts.shards)])
        reader.wait_for("warm", 60)
        ls0, km0 = servers.cpu.sample()
        produced, put_s = produce(kinesis, stream, count, opts.rate, opts.put_interval)
        reader.wait_for("done", 60)
        ls1, km1 = servers.cpu.sample()
        result = reader.wait_for("result", 60)
    except (TimeoutError, RuntimeError) as exc:
        return {"method": method, "error": str(exc)}
    finally:
        reader.stop()
    from_put = sorted(lat for _, lat in result["latencies"])
    from_ack = sorted(lat - put_s[number] for number, lat in result["latencies"])
    result.update(ls_cpu_s=ls1 - ls0, km_cpu_s=km1 - km0, produced_s=produced, count=count, stream=stream,
                  put_p50=percentile(sorted(put_s), 50), p50=percentile(from_put, 50), p95=percentile(from_put, 95),
                  max=from_put[-1] if from_put else None, min=from_put[0] if from_put else None,
                  ack_p50=percentile(from_ack, 50), ack_p95=percentile(from_ack, 95))
    if result["timed"] < count:
        result["error"] = f"got {result['timed']} of {count} timed records"
    return result


# -- tables ---------------------------------------------------------------------------------------


def ratio(value: float | None, ref: float | None) -> str:
    if value is None or not ref:
        return "n/a"
    return f"{value / ref:.2f}x"


def throughput_row(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each column over the rounds that read everything (or the last error)."""
    good = [r for r in results if "error" not in r]
    if not good:
        return {"error": results[-1]["error"] if results else "not run"}

    def median(fn: Any) -> float:
        return statistics.median(fn(r) for r in good)

    return {
        "rate": median(lambda r: r["records"] / r["seconds"]),
        "cpu_us": median(lambda r: r["cpu_s"] / r["records"] * 1e6),
        "cpu_pct": median(lambda r: 100 * r["cpu_s"] / r["seconds"]),
        "ls_pct": median(lambda r: 100 * r["ls_cpu_s"] / r["seconds"]),
        "km_pct": median(lambda r: 100 * r["km_cpu_s"] / r["seconds"]),
        "start_s": median(lambda r: r["start_s"]),
        "first_s": median(lambda r: r["first_s"]),
        "rounds": len(good),
    }


def print_throughput(rows: dict[str, dict[str, Any]]) -> None:
    base = rows.get("polling")
    base = None if base is None or "error" in base else base
    print(f"   {'reader':<32}{'rec/s':>9}{'CPU us/rec':>11}{'CPU%':>6}{'LS CPU%':>8}{'km CPU%':>8}{'start s':>8}"
          f"{'1st s':>7}{'rate/poll':>10}{'CPU/poll':>9}")
    for method, r in rows.items():
        if "error" in r:
            print(f"   {LABELS[method]:<32}{'n/a':>9}   ({r['error']})")
            continue
        print(f"   {LABELS[method]:<32}{r['rate']:>9,.0f}{r['cpu_us']:>11.1f}{r['cpu_pct']:>6.0f}{r['ls_pct']:>8.0f}"
              f"{r['km_pct']:>8.0f}{r['start_s']:>8.2f}{r['first_s']:>7.2f}{ratio(r['rate'], base and base['rate']):>10}"
              f"{ratio(r['cpu_us'], base and base['cpu_us']):>9}")


def print_latency(results: dict[str, dict[str, Any]]) -> None:
    base = results.get("polling")
    base = None if base is None or not base.get("timed") else base

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{1000 * value:.0f}"

    print(f"   {'reader':<32}{'p50 ms':>7}{'p95 ms':>7}{'max ms':>7}{'ack p50':>8}{'ack p95':>8}{'put ms':>7}"
          f"{'CPU%':>6}{'LS CPU%':>8}{'km CPU%':>8}{'p50/poll':>9}{'p95/poll':>9}")
    for method, r in results.items():
        if not r.get("timed"):
            print(f"   {LABELS[method]:<32}{'n/a':>7}   ({r.get('error')})")
            continue
        window = r["window_s"]
        note = f"   ({r['error']})" if "error" in r else ""
        print(f"   {LABELS[method]:<32}{ms(r['p50']):>7}{ms(r['p95']):>7}{ms(r['max']):>7}{ms(r['ack_p50']):>8}"
              f"{ms(r['ack_p95']):>8}{ms(r['put_p50']):>7}"
              f"{100 * r['window_cpu_s'] / window:>6.1f}{100 * r['ls_cpu_s'] / window:>8.1f}"
              f"{100 * r['km_cpu_s'] / window:>8.1f}"
              f"{ratio(r['p50'], base and base['p50']):>9}{ratio(r['p95'], base and base['p95']):>9}{note}")


# -- main -----------------------------------------------------------------------------------------


class Servers:
    """LocalStack (Kinesis, EFO) and DynamoDB Local (lease tables), started side by side."""

    def __init__(self, stack: ExitStack) -> None:
        import launcher
        import localstack_host

        if not localstack_host.is_installed():
            raise SystemExit("LocalStack is not installed (needs Python 3.13): run `make localstack-host` or "
                             "`.venv/bin/python localstack/localstack_host.py install` outside the namespace")
        localstack = localstack_host.LocalStack()
        emulators = launcher.Emulators(kinesis=False, dynamodb=True)
        stack.callback(localstack.stop)
        stack.callback(emulators.stop)
        with ThreadPoolExecutor(2) as pool:
            started = [pool.submit(localstack.start), pool.submit(emulators.start)]
            for future in started:
                future.result()
        self.localstack, self.emulators = localstack, emulators
        self.endpoint, self.dynamodb = localstack.endpoint, emulators.dynamodb_endpoint
        os.environ.update(localstack.env())
        os.environ.update(emulators.env())
        from kinesis_src import AwsSettings
        from kinesis_src.aws import KinesisClient

        self.kinesis = KinesisClient(AwsSettings(region=REGION, endpoint_url=self.endpoint))
        self.cpu = ServerCpu(localstack.pid)


def throughput(opts: argparse.Namespace, servers: Servers) -> dict[str, dict[str, Any]]:
    t0 = time.perf_counter()
    expect = preload(servers.kinesis, "throughput", opts.shards, opts.records_per_shard, opts.size)
    print(f"1. throughput: preloaded {expect:,} records x {opts.size} B into {opts.shards} LocalStack shards in "
          f"{time.perf_counter() - t0:.1f} s; {opts.rounds} round(s), each reader a fresh process, "
          "TRIM_HORIZON to the last record", flush=True)
    methods = [m for m in THROUGHPUT_METHODS if m in opts.methods]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for rnd in range(opts.rounds):
        for method in methods:
            r = measure_throughput(method, opts, servers, "throughput", expect)
            runs[method].append(r)
            if "error" in r:
                print(f"   round {rnd + 1} {LABELS[method]:<32} n/a: {r['error']}", flush=True)
            else:
                print(f"   round {rnd + 1} {LABELS[method]:<32} {r['records'] / r['seconds']:>8,.0f} rec/s "
                      f"{r['seconds']:6.2f} s  CPU {r['cpu_s']:5.2f} s  LocalStack CPU {r['ls_cpu_s']:5.2f} s  "
                      f"kinesis-mock CPU {r['km_cpu_s']:5.2f} s  start {r['start_s']:.2f} s  first batch after "
                      f"{r['first_s']:.2f} s", flush=True)
    rows = {method: throughput_row(results) for method, results in runs.items()}
    print(f"\n   median of {opts.rounds} round(s), each column on its own:")
    print_throughput(rows)
    print("   (CPU us/rec: reader CPU per record; CPU%: of one core, reader; LS CPU%: LocalStack's Python process; "
          "km CPU%: its kinesis-mock (node); start s: reader start-up, outside the window; 1st s: window start to "
          "the first batch; ratios vs the polling Consumer)")
    good = [r for rs in runs.values() for r in rs if "error" not in r]
    if good:
        km = [r["records"] / r["km_cpu_s"] for r in good if r["km_cpu_s"]]
        ls = [r["records"] / r["ls_cpu_s"] for r in good if r["ls_cpu_s"]]
        print(f"   ceilings (records / the server's CPU seconds, i.e. that process alone at 100% of one core): "
              f"kinesis-mock {min(km):,.0f}-{max(km):,.0f} rec/s, LocalStack {min(ls):,.0f}-{max(ls):,.0f} rec/s")
    report_consumers_left(servers, ["throughput"])
    return rows


def report_consumers_left(servers: Servers, streams: list[str]) -> None:
    """The EFO readers deregister their stream consumers on close (a stream allows 20): check that they did."""
    from kinesis_src.aws import FanOut

    fanout = FanOut(servers.kinesis)
    left = {s: [c.name for c in fanout.list_consumers(servers.kinesis.describe_stream(s).arn)] for s in streams}
    names = [f"{s}: {', '.join(c)}" for s, c in left.items() if c]
    print(f"   stream consumers still registered afterwards: {'; '.join(names) if names else 'none'}")


def latency(opts: argparse.Namespace, servers: Servers) -> dict[str, dict[str, Any]]:
    count = int(opts.rate * opts.duration)
    print(f"\n2. put-to-delivery latency: {opts.rate:g} records/s for {opts.duration:g} s ({count} records of ~20 B, "
          f"one PutRecords every {opts.put_interval:g} s) into a fresh {opts.shards}-shard stream per reader, "
          "after a warm-up", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for index, method in enumerate(m for m in LATENCY_METHODS if m in opts.methods):
        r = measure_latency(method, opts, servers, index)
        results[method] = r
        if "error" in r and not r.get("timed"):
            print(f"   {LABELS[method]:<32} n/a: {r['error']}", flush=True)
        else:
            print(f"   {LABELS[method]:<32} p50 {1000 * r['p50']:5.0f} ms  p95 {1000 * r['p95']:5.0f} ms  "
                  f"max {1000 * r['max']:5.0f} ms  min {1000 * r['min']:4.0f} ms  ({r['timed']} records, produced "
                  f"in {r['produced_s']:.1f} s, PutRecords p50 {1000 * r['put_p50']:.0f} ms)"
                  f"{'  ' + r['error'] if 'error' in r else ''}", flush=True)
    print()
    print_latency(results)
    print("   (p50/p95/max: from just before the PutRecords call; ack p50/p95: from its return, i.e. without the "
          "put's own time; put ms: PutRecords p50; CPU%: of one core over the timed window, reader; LS / km CPU%: "
          "LocalStack and its kinesis-mock; ratios vs the polling Consumer)")
    report_consumers_left(servers, [r["stream"] for r in results.values() if "stream" in r])
    return results


def decode_cost(size: int, count: int = 2_500) -> None:
    """In this process, no server: where an EFO reader's extra CPU per record goes.

    One SubscribeToShardEvent payload of ``count`` records through botocore's
    event-stream parser (a datetime and a base64 decode per record) plus
    ``event_from``, which is what ``AsyncFanOut.subscribe`` did until it read
    events below botocore's parser; through the fast event decode it uses
    now; and the same records as a GetRecords body through the fast decode
    the polling path uses. Best of 7.
    """
    import base64

    import botocore.session
    from botocore.parsers import EventStreamJSONParser

    from kinesis_src.aws.decode import decode_get_records, decode_subscribe_event
    from kinesis_src.aws.fanout import event_from

    now = time.time()
    records = [{"SequenceNumber": str(49_600_000_000_000_000_000_000_000_000_000_000_000_000_000_000 + i),
                "ApproximateArrivalTimestamp": now, "Data": base64.b64encode(os.urandom(size)).decode(),
                "PartitionKey": f"key-{i}"} for i in range(count)]
    last = records[-1]["SequenceNumber"]
    event_body = json.dumps({"Records": records, "ContinuationSequenceNumber": last, "MillisBehindLatest": 0}).encode()
    page_body = json.dumps({"Records": records, "NextShardIterator": "AAAA", "MillisBehindLatest": 0}).encode()
    output = botocore.session.get_session().get_service_model("kinesis").operation_model("SubscribeToShard").output_shape
    shape = output.members["EventStream"].members["SubscribeToShardEvent"]
    parser = EventStreamJSONParser()
    response = {"status_code": 200, "body": event_body,
                "headers": {":event-type": "SubscribeToShardEvent", ":message-type": "event"}}

    def best(fn: Any) -> float:
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) / count * 1e6

    parsed = parser.parse(response, shape)
    botocore_us, convert_us = best(lambda: parser.parse(response, shape)), best(lambda: event_from(parsed))
    fast_us = best(lambda: decode_get_records(page_body))
    event_us = best(lambda: decode_subscribe_event(event_body))  # what subscribe() does since 901c1b3
    print(f"\n4. decoding one page of {count:,} records x {size} B in this process (best of 7): SubscribeToShardEvent "
          f"through botocore's event parser {botocore_us:.1f} us/record + event_from {convert_us:.1f} us/record; "
          f"through kinesis-src's fast event decode (what subscribe() uses) {event_us:.1f} us/record; the same "
          f"records as a GetRecords body through the fast decode {fast_us:.1f} us/record "
          f"(botocore path {(botocore_us + convert_us) / event_us:.1f}x the fast event decode)")


def summary(tput: dict[str, dict[str, Any]], lat: dict[str, dict[str, Any]]) -> None:
    print("\n3. EFO / polling Consumer (same run, same LocalStack):")
    base_t, base_l = tput.get("polling"), lat.get("polling")
    for method in ("efo", "raw-efo"):
        parts = []
        t, lt = tput.get(method), lat.get(method)
        if t and base_t and "error" not in t and "error" not in base_t:
            parts.append(f"rate {t['rate'] / base_t['rate']:.2f}x, CPU per record {t['cpu_us'] / base_t['cpu_us']:.2f}x")
        if lt and base_l and lt.get("timed") and base_l.get("timed"):
            parts.append(f"latency p50 {lt['p50'] / base_l['p50']:.2f}x, p95 {lt['p95'] / base_l['p95']:.2f}x, "
                         f"ack p50 {lt['ack_p50'] / base_l['ack_p50']:.2f}x")
            if lat.get("polling-0.2", {}).get("timed"):
                fast = lat["polling-0.2"]
                parts.append(f"(vs idle 0.2 s: p50 {lt['p50'] / fast['p50']:.2f}x, p95 {lt['p95'] / fast['p95']:.2f}x)")
        print(f"   {LABELS[method]:<32} {'; '.join(parts) or 'n/a'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--records-per-shard", type=int, default=2_500)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0, help="latency part: records/s")
    parser.add_argument("--duration", type=float, default=15.0, help="latency part: seconds of production")
    parser.add_argument("--put-interval", type=float, default=0.1, help="latency part: seconds between PutRecords")
    parser.add_argument("--methods", default=",".join(LATENCY_METHODS),
                        help=f"comma-separated subset of {', '.join(LABELS)}")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-decode", action="store_true")
    # internal: one reader run in this subprocess
    parser.add_argument("--run", choices=list(LABELS), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--dynamodb", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.run:
        run_reader(opts)
        return
    opts.methods = [m.strip() for m in opts.methods.split(",") if m.strip()]
    unknown = set(opts.methods) - set(LABELS)
    if unknown:
        parser.error(f"unknown --methods {sorted(unknown)}; choose from {', '.join(LABELS)}")

    started = time.perf_counter()
    with ExitStack() as stack:
        servers = Servers(stack)
        print(f"LocalStack at {servers.endpoint} (ready in {servers.localstack.startup_seconds:.1f} s, "
              f"pid {servers.localstack.pid}, kinesis-mock pid(s) {servers.cpu.kinesis_mock}), "
              f"DynamoDB Local at {servers.dynamodb}\n", flush=True)
        tput = {} if opts.skip_throughput else throughput(opts, servers)
        lat = {} if opts.skip_latency else latency(opts, servers)
        summary(tput, lat)
    if not opts.skip_decode:
        decode_cost(opts.size)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
