"""The fault campaign's scenarios: a workload through a split and a merge, a fault, and the bill.

Every scenario runs against one engine -- the Spark streaming query
(``spark_job.py``, a process writing Parquet with a checkpoint) or three
consumer workers (``fault_worker.py``, one process each) -- with every AWS
call of the engine going through the fault proxies (:mod:`proxy`), while
the test's own producer and the reshards go to the emulators directly.

The standard shape (:func:`during_run`):

1. a fresh 2-shard stream with 100 records (20 keys x 5 rounds);
2. the engine starts and delivers its first records;
3. a paced producer writes 20 records every 0.2 s;
4. the fault starts; 1.5 s later shard 0 is split, 2 s after that its upper
   child is merged with shard 1, so every key has records in a parent and a
   child and every reshard happens while the fault is on;
5. the fault ends; the producer stops 2 s later;
6. the scenario waits (with a deadline) until every produced record was
   delivered, then stops the engine and counts.

What is counted (:class:`Result`):

* ``produced``: records Kinesis acknowledged to the producer;
* ``delivered``: distinct produced records the engine delivered (Spark: in
  committed Parquet output, per the sink's own log);
* ``lost``: produced but never delivered by the deadline (must be 0);
* ``duplicated``: Spark: extra copies of a ``(shardId, sequenceNumber)`` in
  the committed output (must be 0). Consumer: extra deliveries; the ones
  allowed are the unacknowledged tail (a delivery whose checkpoint never
  succeeded); ``dup_acked`` counts deliveries of a record after a delivery
  of it was acknowledged (must be 0);
* ``out_of_order``: per-key counter regressions, each record counted at
  its first delivery (with ``preserveShardOrder`` on, must be 0);
* ``recover_s``: from the end of the fault to the first delivery after it
  (process faults: from the kill or stop to the first delivery of an
  affected shard by a live process; restarts: from the restart);
* ``catchup_s``: from the last record produced to every record delivered.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from proxy import (  # noqa: E402
    DYNAMODB,
    KINESIS,
    LATENCY,
    LOST_RESPONSE,
    RESET,
    TRUNCATE,
    Fault,
    ProxyPair,
    aws_error,
    transaction_canceled,
)
from worker_process import kill_group  # tests/worker_process.py

from kinesis_src import AwsSettings, KinesisClient  # noqa: E402
from kinesis_src.aws.dynamodb import DynamoDBClient  # noqa: E402
from kinesis_src.leases.table import LeaseTable  # noqa: E402
from kinesis_src.names import default_table_name  # noqa: E402
from kinesis_src.retry import RetryPolicy  # noqa: E402
from kinesis_src.workload import KeyedProducer, decode, encode  # noqa: E402

WORKER = HERE / "fault_worker.py"
SPARK_JOB = HERE / "spark_job.py"
KEYS = 20
ROUND_S = 0.2
FAILOVER, RENEW, SCAN = 3.0, 1.0, 0.25
SPLIT_AFTER_S, MERGE_AFTER_S = 1.5, 3.5
DIRECT_RETRY = RetryPolicy(max_attempts=8, initial_backoff_s=0.05, max_backoff_s=1.0)


def log(message: str) -> None:
    print(f"[campaign {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def poll(condition: Callable[[], Any], timeout_s: float, poll_s: float = 0.1) -> Any:
    """The condition's first truthy value, or None after the deadline (the caller reports what was missing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(poll_s)


# -- results --------------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    engine: str
    fault: str
    produced: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    dup_acked: int = 0      # consumer: deliveries of a record after an earlier delivery of it was acknowledged
    acked_twice: int = 0    # consumer: records whose checkpoint succeeded after two different deliveries
    out_of_order: int = 0
    recover_s: float | None = None
    catchup_s: float | None = None
    injected: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    order_required: bool = True

    @property
    def ok(self) -> bool:
        return (self.lost == 0 and self.dup_acked == 0 and self.acked_twice == 0 and not self.failures
                and (self.engine == "consumer" or self.duplicated == 0)
                and (self.out_of_order == 0 or not self.order_required) and self.produced > 0)

    @property
    def verdict(self) -> str:
        if self.produced == 0:
            return "ERROR"
        if self.lost:
            return "LOST"
        if self.acked_twice or (self.engine == "spark" and self.duplicated):
            return "DUPLICATED"
        if self.failures:
            return "FAILED"
        if self.out_of_order and self.order_required:
            return "ORDER"
        if self.dup_acked:
            return "REDELIVERED"
        return "ok"

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "verdict": self.verdict}


# -- the shared context -----------------------------------------------------------------------------


class PacedProducer:
    """Rounds of one record per key every ``ROUND_S`` seconds, on a thread, straight to the emulator."""

    def __init__(self, producer: KeyedProducer) -> None:
        self.producer = producer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None
        self.last_put_t = time.monotonic()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self.producer.put_round()
                self.last_put_t = time.monotonic()
            except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
                self.error = exc
                return
            next_t += ROUND_S
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise RuntimeError(f"producer failed: {self.error!r}") from self.error


class Context:
    """One scenario's stream, producer, proxies, engine and work directory."""

    def __init__(self, name: str, emulator_env: dict[str, str], workdir: Path, seed: int = 1) -> None:
        self.name = name
        self.env = dict(emulator_env)
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.stream = f"faults-{name}-{int(time.time() * 1000) % 10**8}"
        settings = AwsSettings(region="us-east-1", endpoint_url=emulator_env["KINESIS_SRC_ENDPOINT_URL"],
                               dynamodb_endpoint_url=emulator_env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"],
                               retry=DIRECT_RETRY)
        self.kinesis = KinesisClient(settings)
        self.dynamodb = DynamoDBClient(settings)
        self.proxies = ProxyPair(emulator_env, seed=seed)
        self.producer = KeyedProducer(self.kinesis, self.stream, keys=KEYS)
        self.paced: PacedProducer | None = None
        self.wall_offset = time.time() - time.monotonic()

    def __enter__(self) -> Context:
        self.proxies.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxies.stop()

    def proxied_env(self) -> dict[str, str]:
        return self.proxies.env()

    def create_stream(self, rounds: int = 5) -> None:
        self.kinesis.create_stream(self.stream, 2)
        self.kinesis.wait_active(self.stream)
        self.producer.put_rounds(rounds)

    def split(self) -> None:
        self.kinesis.split_shard(self.stream, "shardId-000000000000", 2**126)
        self.kinesis.wait_active(self.stream)

    def merge(self) -> None:
        self.kinesis.merge_shards(self.stream, "shardId-000000000003", "shardId-000000000001")
        self.kinesis.wait_active(self.stream)

    def put_rounds(self, rounds: int) -> None:
        assert self.paced is None, "the paced producer is running: KeyedProducer is not thread-safe"
        self.producer.put_rounds(rounds)

    def start_producing(self) -> None:
        self.paced = PacedProducer(self.producer).start()

    def stop_producing(self) -> float:
        if self.paced is not None:
            self.paced.stop()
            self.paced = None
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        """Scenario time is wall time: a fault lasts T seconds. Not a wait for a condition."""
        remaining = t - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)


# -- engines --------------------------------------------------------------------------------------------


Delivery = tuple[str, str, int, int, float, list[tuple[str, int, str]]]  # worker, shard, holding, index, t, records


class WorkerProc:
    def __init__(self, worker_id: str, ctx: Context, app: str, extra: list[str]) -> None:
        self.worker_id = worker_id
        self.stderr_path = ctx.workdir / f"{worker_id}.stderr"
        self._stderr = open(self.stderr_path, "a")  # noqa: SIM115 - closed in kill()
        env = {**os.environ, **ctx.proxied_env(), "PYTHONPATH": str(REPO), "FAULT_WORKER_LOG": "INFO"}
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "--stream", ctx.stream, "--application", app, "--worker-id", worker_id,
             "--failover", str(FAILOVER), "--renew", str(RENEW), "--scan", str(SCAN), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True,
            bufsize=1, start_new_session=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._events_path = ctx.workdir / f"{worker_id}.events.jsonl"
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with open(self._events_path, "a") as copy:
            for line in self.proc.stdout:  # type: ignore[union-attr]
                copy.write(line)
                self._take(line)

    def _take(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        with self._lock:
            self.events.append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    def signal(self, sig: int) -> float:
        sent = time.monotonic()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        return sent

    def kill(self) -> None:
        kill_group(self.proc, 10)
        self._reader.join(5)
        self._stderr.close()


class ConsumerEngine:
    """Three (by default) worker processes sharing one application."""

    name = "consumer"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.app = f"faults-{ctx.name}"[:100]
        self.workers: dict[str, WorkerProc] = {}
        self.all_workers: list[WorkerProc] = []
        self._generation = 0
        self.extra: list[str] = []

    def start(self, count: int = 3, extra: list[str] | None = None) -> None:
        self._generation += 1
        for i in range(1, count + 1):
            self.start_worker(f"w{i}g{self._generation}", extra)

    def start_worker(self, worker_id: str, extra: list[str] | None = None) -> WorkerProc:
        worker = WorkerProc(worker_id, self.ctx, self.app, list(extra if extra is not None else self.extra))
        self.workers[worker_id] = worker
        self.all_workers.append(worker)
        return worker

    def stop_all(self, timeout_s: float = 30) -> None:
        """SIGTERM every live worker (graceful: release leases) and wait for them."""
        live = [w for w in self.workers.values() if w.proc.poll() is None]
        for w in live:
            w.signal(signal.SIGCONT)
            os.kill(w.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for w in live:
            try:
                w.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for w in live:
            w.kill()
        self.workers = {}

    def close(self) -> None:
        for w in self.all_workers:
            w.kill()

    def owners(self) -> dict[str, str | None]:
        table = LeaseTable(self.ctx.dynamodb, default_table_name(self.app), self.app, self.ctx.stream)
        return {lease.shard_id: lease.owner for lease in table.list_leases()}

    def deliveries(self) -> list[Delivery]:
        out: list[Delivery] = []
        for w in self.all_workers:
            for e in w.of("batch"):
                out.append((w.worker_id, e["shard"], e["holding"], e["index"], e["t"],
                            [(k, n, s) for k, n, s in e["records"]]))
        out.sort(key=lambda d: d[4])
        return out

    def delivered_keys(self) -> set[tuple[str, int]]:
        return {(k, n) for d in self.deliveries() for k, n, _ in d[5]}

    def first_delivery(self, shards: set[str] | None) -> bool:
        return any(shards is None or d[1] in shards for d in self.deliveries())

    def failures(self) -> list[str]:
        out = []
        for w in self.all_workers:
            for e in w.of("failed"):
                frames = [line.strip() for line in e.get("trace", "").splitlines() if line.strip().startswith("File ")]
                inner = frames[-1].replace(str(REPO) + "/", "") if frames else "?"
                out.append(f"worker {w.worker_id} died: {e['error']}: {e['message'][:300]} (raised at {inner})")
        return out

    def account(self, result: Result, produced: set[tuple[str, int]], fault_end: float,
                affected: set[str] | None, last_put: float, exclude_worker: str | None = None) -> None:
        deliveries = self.deliveries()
        acked_at: dict[tuple[str, str, int], list[tuple[int, float]]] = defaultdict(list)
        failed_checkpoints = 0
        for w in self.all_workers:
            for e in w.of("checkpointed"):
                acked_at[(w.worker_id, e["shard"], e["holding"])].append((e["index"], e["t"]))
            failed_checkpoints += len(w.of("checkpoint_failed"))

        def ack_time(d: Delivery) -> float | None:
            times = [t for index, t in acked_at.get((d[0], d[1], d[2]), ()) if index >= d[3]]
            return min(times) if times else None

        per_record: dict[tuple[str, str], list[tuple[float, float | None]]] = defaultdict(list)
        first: dict[tuple[str, int], float] = {}
        order: list[tuple[str, int]] = []
        for d in deliveries:
            acked = ack_time(d)
            for key, n, seq in d[5]:
                per_record[(d[1], seq)].append((d[4], acked))
                if (key, n) not in first:
                    first[(key, n)] = d[4]
                    order.append((key, n))
        delivered = set(first) & produced
        result.produced = len(produced)
        result.delivered = len(delivered)
        result.lost = len(produced - delivered)
        result.duplicated = sum(len(v) - 1 for v in per_record.values())
        result.dup_acked = sum(
            1 for v in per_record.values() for t, _ in v
            if any(a is not None and a < t for _, a in v)
        )
        result.acked_twice = sum(1 for v in per_record.values() if sum(a is not None for _, a in v) > 1)
        latest: dict[str, tuple[int, str]] = {}
        where = {(k, n): (d[0], d[1]) for d in reversed(deliveries) for k, n, _ in d[5]}
        examples = []
        for key, n in order:
            previous = latest.get(key, (0, ""))
            if n <= previous[0]:
                result.out_of_order += 1
                if len(examples) < 3:
                    examples.append(f"{key}:{n} ({where[(key, n)][1]} by {where[(key, n)][0]}) first delivered "
                                    f"after {key}:{previous[0]} ({previous[1]})")
            if n > previous[0]:
                latest[key] = (n, f"{where[(key, n)][1]} by {where[(key, n)][0]}")
        if examples:
            result.notes.append("out of order, e.g. " + "; ".join(examples))
        after = [d[4] for d in deliveries if d[4] > fault_end and (affected is None or d[1] in affected)
                 and d[0] != exclude_worker]
        result.recover_s = round(min(after) - fault_end, 2) if after else None
        if not result.lost and delivered:
            done = max(first[r] for r in produced)
            result.catchup_s = round(max(0.0, done - last_put), 2)
        never_acked = sum(1 for v in per_record.values() if all(a is None for _, a in v))
        result.notes.append(f"{len(deliveries)} batches, {failed_checkpoints} rejected checkpoints, "
                            f"{never_acked} records never acknowledged")
        result.failures.extend(self.failures())


class SparkEngine:
    """The streaming job as a process; output and checkpoint under the scenario's work directory."""

    name = "spark"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.app = f"faults-{ctx.name}"[:100]
        self.out = ctx.workdir / "spark"
        self.out.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self.args: list[str] = []
        self.deaths: list[str] = []

    @property
    def log_path(self) -> Path:
        return self.out / f"job{self.runs}.log"

    def start(self, *args: str) -> float:
        self.runs += 1
        self.args = list(args)
        env = {**os.environ, **self.ctx.proxied_env(), "PYTHONPATH": str(REPO)}
        with open(self.log_path, "w") as stderr:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, str(SPARK_JOB), "--stream", self.ctx.stream, "--out", str(self.out),
                 "--application", self.app, *args],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                start_new_session=True,
            )
        return time.monotonic()

    def signal(self, sig: int) -> float:
        sent = time.monotonic()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        return sent

    def kill(self) -> None:
        if self.proc is not None:
            kill_group(self.proc, 30)
            self.proc = None

    close = kill

    def wait_exit(self, timeout_s: float) -> int | None:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        if code != 0:
            self.deaths.append(f"run {self.runs} ({' '.join(self.args) or 'processing'}) exited {code}: "
                               f"{self.error_line()}")
        self.proc = None
        return code

    def error_line(self) -> str:
        """The first Python exception in the job's log, with the innermost kinesis_src frame and Spark's phase."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "?"
        for i, line in enumerate(lines):
            if re.match(r"^[A-Za-z_][\w.]*(Error|Exception): ", line) and not line.startswith(("org.", "java.")):
                frames = [f.strip() for f in lines[:i] if f.strip().startswith("File ") and "kinesis_src" in f]
                phase = next((m.group(1) for f in reversed(lines[:i])
                              if (m := re.search(r"Python streaming data source perform (\w+)", f))), None)
                where = frames[-1].replace(str(REPO) + "/", "") if frames else ""
                return (line.strip()[:300] + (f" (in {phase})" if phase else "")
                        + (f" at {where}" if where else ""))
        errors = [line for line in lines if "ERROR" in line or "Exception" in line]
        return (errors or lines[-1:] or ["?"])[0].strip()[:400]

    def died(self) -> bool:
        """True (once) when a processing-time job exited; the death is recorded."""
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            self.deaths.append(f"run {self.runs} exited {code}: {self.error_line()}")
            self.proc = None
            return True
        return False

    def batches(self) -> list[tuple[int, float, list[tuple[str, str, str, int]]]]:
        """Committed batches: (batch id, commit time (monotonic), [(shardId, sequenceNumber, key, n)])."""
        import pyarrow.parquet as pq

        log_dir = self.out / "data" / "_spark_metadata"
        if not log_dir.is_dir():
            return []
        out = []
        for name in sorted((n for n in os.listdir(log_dir) if n.isdigit()), key=int):
            path = log_dir / name
            try:
                mtime = path.stat().st_mtime - self.ctx.wall_offset
                lines = path.read_text().splitlines()[1:]
            except OSError:
                continue
            rows: list[tuple[str, str, str, int]] = []
            for entry in map(json.loads, lines):
                if entry.get("action") != "add":
                    continue
                table = pq.read_table(entry["path"].removeprefix("file://"),
                                      columns=["shardId", "sequenceNumber", "data"])
                for shard, seq, data in zip(*(table.column(c).to_pylist() for c in ("shardId", "sequenceNumber", "data"))):
                    key, n = decode(data)
                    rows.append((shard, seq, key, n))
            out.append((int(name), mtime, rows))
        return out

    def delivered_keys(self) -> set[tuple[str, int]]:
        return {(k, n) for _, _, rows in self.batches() for _, _, k, n in rows}

    def first_delivery(self, shards: set[str] | None = None) -> bool:
        return any(rows for _, _, rows in self.batches())

    def account(self, result: Result, produced: set[tuple[str, int]], fault_end: float,
                affected: set[str] | None, last_put: float, exclude_worker: str | None = None) -> None:
        batches = self.batches()
        positions: Counter[tuple[str, str]] = Counter()
        first: dict[tuple[str, int], float] = {}
        latest: dict[str, int] = {}
        latest_batch: dict[str, int] = {}
        examples: list[str] = []
        for batch_id, t, rows in batches:
            for shard, seq, key, n in rows:
                positions[(shard, seq)] += 1
                if (key, n) not in first:
                    first[(key, n)] = t
                if n <= latest.get(key, 0):
                    result.out_of_order += 1
                    if len(examples) < 3:
                        examples.append(f"{key}:{n} ({shard}, batch {batch_id}) after {key}:{latest[key]} "
                                        f"(batch {latest_batch[key]})")
                if n > latest.get(key, 0):
                    latest[key], latest_batch[key] = n, batch_id
        delivered = set(first) & produced
        result.produced = len(produced)
        result.delivered = len(delivered)
        result.lost = len(produced - delivered)
        result.duplicated = sum(c - 1 for c in positions.values() if c > 1)
        after = [t for _, t, rows in batches if t > fault_end and rows]
        result.recover_s = round(min(after) - fault_end, 2) if after else None
        if not result.lost and delivered:
            result.catchup_s = round(max(0.0, max(first[r] for r in produced) - last_put), 2)
        result.notes.append(f"{len(batches)} committed batches over {self.runs} run(s)")
        if examples:
            result.notes.append("out of order, e.g. " + "; ".join(examples))
        result.failures.extend(f"query died: {d}" for d in self.deaths)


ENGINES = {"consumer": ConsumerEngine, "spark": SparkEngine}


# -- the standard shape -------------------------------------------------------------------------------------


@dataclass
class Window:
    """What a fault callback did: when the fault ended, which shards it hit (None: all), who it hit."""

    end: float
    affected: set[str] | None = None
    victim: str | None = None
    measured_from: float | None = None  # recovery measured from here instead of ``end``


def wait_delivered(ctx: Context, engine: Any, timeout_s: float, restart_dead_spark: bool = True) -> bool:
    """Poll until every produced record was delivered. A Spark query that died is restarted once per death
    (as an operator would), after its death was recorded; the restart runs without changing the faults."""
    expected = ctx.producer.expected()

    def done() -> bool:
        if isinstance(engine, SparkEngine) and engine.died() and restart_dead_spark:
            log(f"{ctx.name}: query died ({engine.deaths[-1][:200]}); restarting it")
            ctx.proxies.clear()
            engine.start(*engine.args)
        return expected <= engine.delivered_keys()

    return bool(poll(done, timeout_s, poll_s=0.5 if isinstance(engine, SparkEngine) else 0.2))


def start_engine(ctx: Context, engine: Any, *spark_args: str) -> None:
    if isinstance(engine, SparkEngine):
        engine.start(*spark_args)
    else:
        engine.start()
    timeout = 180 if isinstance(engine, SparkEngine) else 60
    if not wait_delivered(ctx, engine, timeout):
        raise RuntimeError(f"{engine.name} delivered nothing within {timeout}s of its start"
                           + (f": {engine.error_line()}" if isinstance(engine, SparkEngine) else
                              f": {engine.failures()}"))


def during_run(inject: Callable[[Context, Any], Window]) -> Callable[[Context, Any, Result], None]:
    """The standard shape: ``inject(ctx, engine)`` starts the fault, reshards are timed from that moment."""

    def body(ctx: Context, engine: Any, result: Result) -> None:
        ctx.create_stream()
        start_engine(ctx, engine)
        ctx.start_producing()
        began = time.monotonic()
        reshards = threading.Thread(target=_reshard_on_schedule, args=(ctx, began), daemon=True)
        reshards.start()
        window = inject(ctx, engine)
        reshards.join(60)
        ctx.sleep_until(max(window.end, began + MERGE_AFTER_S) + 2.0)
        last_put = ctx.stop_producing()
        ctx.proxies.clear()
        timeout = 240 if isinstance(engine, SparkEngine) else 90
        caught_up = wait_delivered(ctx, engine, timeout)
        if not caught_up:
            result.notes.append(f"not caught up {timeout}s after the producer stopped")
        settle(engine)
        engine.account(result, ctx.producer.expected(), window.measured_from or window.end, window.affected,
                       last_put, exclude_worker=window.victim)

    return body


def _reshard_on_schedule(ctx: Context, began: float) -> None:
    ctx.sleep_until(began + SPLIT_AFTER_S)
    ctx.split()
    ctx.sleep_until(began + MERGE_AFTER_S)
    ctx.merge()


def settle(engine: Any) -> None:
    """Stop the engine so its last events are in: consumer workers get SIGTERM (their checkpoints land)."""
    if isinstance(engine, ConsumerEngine):
        engine.stop_all()
    else:
        engine.kill()


def burst(*faults: Callable[[], Fault], seconds: float) -> Callable[[Context, Any], Window]:
    def inject(ctx: Context, engine: Any) -> Window:
        began = time.monotonic()
        for make in faults:
            fault = make()
            fault.duration_s = seconds
            ctx.proxies.add(fault)
        ctx.sleep_until(began + seconds)
        return Window(end=began + seconds)

    return inject


def next_calls(*faults: Callable[[], Fault], seconds: float) -> Callable[[Context, Any], Window]:
    """Faults bounded by a count; the window ends at the last injection (or after ``seconds``)."""

    def inject(ctx: Context, engine: Any) -> Window:
        began = time.monotonic()
        added = [ctx.proxies.add(make()) for make in faults]
        ctx.sleep_until(began + seconds)
        ends = [f.last_at for f in added if f.last_at is not None]
        return Window(end=max(ends) if ends else began + seconds)

    return inject


# -- process faults ---------------------------------------------------------------------------------------------


def consumer_sigkill(ctx: Context, engine: Any) -> Window:
    victim = next(iter(engine.workers))
    affected = {s for s, owner in engine.owners().items() if owner == victim}
    killed = engine.workers[victim].signal(signal.SIGKILL)
    return Window(end=killed, affected=affected or None, victim=victim)


def consumer_sigstop(ctx: Context, engine: Any) -> Window:
    victim = next(iter(engine.workers))
    affected = {s for s, owner in engine.owners().items() if owner == victim}
    stopped = engine.workers[victim].signal(signal.SIGSTOP)
    ctx.sleep_until(stopped + FAILOVER + 2.0)
    resumed = engine.workers[victim].signal(signal.SIGCONT)
    return Window(end=resumed, affected=affected or None, victim=victim, measured_from=stopped)


def spark_sigkill(ctx: Context, engine: SparkEngine) -> Window:
    engine.kill()
    restarted = engine.start(*engine.args)
    return Window(end=restarted)


def spark_sigstop(ctx: Context, engine: SparkEngine) -> Window:
    stopped = engine.signal(signal.SIGSTOP)
    ctx.sleep_until(stopped + 12.0)  # longer than the 10 s claim failover
    resumed = engine.signal(signal.SIGCONT)
    return Window(end=resumed)


# -- restarts ----------------------------------------------------------------------------------------------------


def restart_after_reshards(ctx: Context, engine: Any, result: Result) -> None:
    """Stop the engine, split and merge while it is down (records in every shard), restart."""
    ctx.create_stream()
    start_engine(ctx, engine)
    ctx.start_producing()
    ctx.sleep_until(time.monotonic() + 1.0)
    if isinstance(engine, SparkEngine):
        engine.kill()
    else:
        engine.stop_all()
    ctx.sleep_until(time.monotonic() + 1.0)
    ctx.stop_producing()  # one producer at a time: KeyedProducer is not thread-safe
    ctx.split()
    ctx.put_rounds(5)
    ctx.merge()
    ctx.put_rounds(5)
    last_put = time.monotonic()
    restarted = time.monotonic()
    if isinstance(engine, SparkEngine):
        engine.start(*engine.args)
    else:
        engine.start()
    caught_up = wait_delivered(ctx, engine, 240 if isinstance(engine, SparkEngine) else 90)
    if not caught_up:
        result.notes.append("not caught up after the restart")
    settle(engine)
    engine.account(result, ctx.producer.expected(), restarted, None, max(last_put, restarted))


def spark_trigger_switch(ctx: Context, engine: SparkEngine, result: Result) -> None:
    """AvailableNow, then processing-time, then AvailableNow again; a reshard between each."""
    ctx.create_stream()
    engine.start("--trigger", "available-now")
    code = engine.wait_exit(240)
    if code is None:
        result.failures.append("AvailableNow run 1 did not finish within 240s")
        engine.kill()
    ctx.put_rounds(5)
    ctx.split()
    ctx.put_rounds(5)
    switched = engine.start("--trigger", "processing")
    ctx.start_producing()
    ctx.sleep_until(time.monotonic() + 2.0)
    last_put = ctx.stop_producing()
    if not wait_delivered(ctx, engine, 120, restart_dead_spark=False):
        result.notes.append("processing-time run after AvailableNow did not catch up within 120s")
    recovered = [t for _, t, rows in engine.batches() if t > switched and rows]
    recover_s = round(min(recovered) - switched, 2) if recovered else None
    engine.kill()
    ctx.merge()
    ctx.put_rounds(5)
    last_put = time.monotonic()
    engine.start("--trigger", "available-now")
    if engine.wait_exit(240) is None:
        result.failures.append("AvailableNow run 3 did not finish within 240s")
        engine.kill()
    engine.account(result, ctx.producer.expected(), switched, None, last_put)
    result.recover_s = recover_s
    result.notes.append("recovery: processing-time run after AvailableNow, from its start")


def spark_option_changes(ctx: Context, engine: SparkEngine, result: Result) -> None:
    """Restarts that change maxRecordsPerTrigger, shardsPerTask and preserveShardOrder, each after a reshard."""
    ctx.create_stream(rounds=10)
    phases = [
        ("--max-records-per-trigger", "60", "--shards-per-task", "1"),
        ("--shards-per-task", "2"),
        ("--max-records-per-trigger", "500", "--no-preserve-order"),
    ]
    reshards = [ctx.split, ctx.merge, None]
    restarted = time.monotonic()
    last_put = restarted
    for args, reshard in zip(phases, reshards):
        committed = len(engine.batches())
        restarted = engine.start(*args)
        poll(lambda n=committed: len(engine.batches()) > n or engine.died(), 180, 0.5)  # this run committed a batch
        ctx.start_producing()  # then records arrive while it runs (kept short: a few hundred per run)
        ctx.sleep_until(time.monotonic() + 3.0)
        last_put = ctx.stop_producing()
        engine.kill()  # mid-run: whatever was in flight is replayed by the next configuration
        if reshard is not None:
            reshard()
            ctx.put_rounds(3)
    engine.start(*phases[-1])
    if not wait_delivered(ctx, engine, 240):
        result.notes.append("not caught up after the last restart")
    engine.kill()
    engine.account(result, ctx.producer.expected(), restarted, None, last_put)
    result.order_required = False  # the last configuration turns preserveShardOrder off
    result.notes.append("order not required: last run has preserveShardOrder=false")


# -- the list ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    engines: tuple[str, ...]
    fault: str
    body: Callable[[Context, Any, Result], None]
    fast: tuple[str, ...] = ()  # engines for which this scenario is in `make test`
    known_defect: str = ""      # named when the fast subset marks it xfail


K = KINESIS
D = DYNAMODB
READS = (K + "GetRecords",)
CONTROL = (K + "ListShards", K + "GetShardIterator", K + "DescribeStreamSummary", K + "DescribeStream")
ALL_K = (K,)
ALL_D = (D,)
BOTH = ("consumer", "spark")

SCENARIOS: list[Scenario] = [
    Scenario("kinesis-throttling", BOTH,
             "6 s burst: GetRecords PTE 50%, other Kinesis calls LimitExceeded 50%",
             during_run(burst(lambda: aws_error("pte", READS, "ProvisionedThroughputExceededException", probability=0.5),
                              lambda: aws_error("limit", CONTROL, "LimitExceededException", probability=0.5),
                              seconds=6)),
             fast=("consumer",)),
    Scenario("kinesis-5xx", BOTH, "6 s burst: every Kinesis call 500 InternalFailure 25% / 503 ServiceUnavailable 25%",
             during_run(burst(lambda: aws_error("500", ALL_K, "InternalFailure", status=500, probability=0.25),
                              lambda: aws_error("503", ALL_K, "ServiceUnavailable", status=503, probability=1 / 3),
                              seconds=6))),
    Scenario("kinesis-reset", BOTH, "6 s burst: 30% of Kinesis answers reset (RST) mid-body",
             during_run(burst(lambda: Fault("reset", RESET, ALL_K, probability=0.3), seconds=6)),
             fast=("consumer",)),
    Scenario("kinesis-truncated", BOTH, "6 s burst: 30% of Kinesis answers truncated (Content-Length kept, FIN)",
             during_run(burst(lambda: Fault("truncate", TRUNCATE, ALL_K, probability=0.3), seconds=6))),
    Scenario("kinesis-latency", BOTH, "8 s burst: 50% of Kinesis calls delayed 2 s",
             during_run(burst(lambda: Fault("latency", LATENCY, ALL_K, probability=0.5, delay_s=2.0), seconds=8))),
    Scenario("kinesis-expired-iterator", BOTH, "6 s burst: GetRecords ExpiredIteratorException 50%",
             during_run(burst(lambda: aws_error("expired", READS, "ExpiredIteratorException", probability=0.5),
                              seconds=6))),
    Scenario("dynamodb-throttling", BOTH,
             "6 s burst: every DynamoDB call ThrottlingException 25% / ProvisionedThroughputExceeded 33%",
             during_run(burst(lambda: aws_error("throttling", ALL_D, "ThrottlingException", probability=0.25),
                              lambda: aws_error("ddb-pte", ALL_D, "ProvisionedThroughputExceededException",
                                                probability=1 / 3),
                              seconds=6)),
             fast=("consumer",)),
    Scenario("dynamodb-transactions", BOTH,  # consumer: SHARD_END and child leases are one transaction
             "8 s burst: TransactWriteItems cancelled (TransactionConflict) 40% / TransactionInProgressException 30%",
             during_run(burst(lambda: transaction_canceled("conflict", "TransactionConflict", probability=0.4),
                              lambda: aws_error("in-progress", (D + "TransactWriteItems",),
                                                "TransactionInProgressException", probability=0.5),
                              seconds=8))),
    Scenario("dynamodb-lost-response", BOTH,
             "the answers to the next 3 UpdateItem, 2 PutItem, 2 TransactWriteItems, 1 DeleteItem are lost "
             "after the write landed (RST)",
             during_run(next_calls(lambda: Fault("lost-update", LOST_RESPONSE, (D + "UpdateItem",), count=3),
                                   lambda: Fault("lost-put", LOST_RESPONSE, (D + "PutItem",), count=2),
                                   lambda: Fault("lost-txn", LOST_RESPONSE, (D + "TransactWriteItems",), count=2),
                                   lambda: Fault("lost-delete", LOST_RESPONSE, (D + "DeleteItem",), count=1),
                                   seconds=6))),
    Scenario("sigkill-worker", ("consumer",), "SIGKILL one of 3 workers while split+merge happen",
             during_run(consumer_sigkill), fast=("consumer",)),
    Scenario("sigstop-worker", ("consumer",), "SIGSTOP one of 3 workers for failover+2 s (5 s), then SIGCONT",
             during_run(consumer_sigstop), fast=("consumer",)),
    Scenario("sigkill-driver", ("spark",), "SIGKILL the driver (process group) and restart it at once",
             during_run(spark_sigkill)),
    Scenario("sigstop-driver", ("spark",), "SIGSTOP the driver (process group) 12 s (> 10 s claim failover), SIGCONT",
             during_run(spark_sigstop)),
    Scenario("restart-after-reshards", BOTH, "stopped (consumer: SIGTERM, Spark: SIGKILL); split and merge "
             "while down; restart", restart_after_reshards),
    Scenario("trigger-switch", ("spark",), "AvailableNow -> processing-time -> AvailableNow, a reshard between",
             spark_trigger_switch),
    Scenario("option-changes", ("spark",), "restarts changing maxRecordsPerTrigger 60 -> unset -> 500, "
             "shardsPerTask 1 -> 2, preserveShardOrder true -> false; killed mid-run, a reshard between",
             spark_option_changes),
]


def run(scenario: Scenario, engine_name: str, emulator_env: dict[str, str], workdir: Path) -> Result:
    """Run one scenario on one engine; never raises (an error becomes a failure in the Result)."""
    result = Result(scenario.name, engine_name, scenario.fault)
    began = time.monotonic()
    log(f"{scenario.name} / {engine_name}: start")
    with Context(f"{scenario.name}-{engine_name}", emulator_env, workdir / f"{scenario.name}-{engine_name}") as ctx:
        engine = ENGINES[engine_name](ctx)
        try:
            scenario.body(ctx, engine, result)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            result.failures.append(f"scenario error: {type(exc).__name__}: {exc}")
            result.notes.append(traceback.format_exc()[-1500:])
            try:
                engine.account(result, ctx.producer.expected(), time.monotonic(), None, time.monotonic())
            except Exception:  # noqa: BLE001
                pass
        finally:
            try:
                ctx.stop_producing()
            except Exception as exc:  # noqa: BLE001
                result.failures.append(str(exc))
            engine.close()
            result.injected = ctx.proxies.injections()
    result.elapsed_s = round(time.monotonic() - began, 1)
    log(f"{scenario.name} / {engine_name}: {result.verdict} produced={result.produced} delivered={result.delivered} "
        f"lost={result.lost} dup={result.duplicated} dup_acked={result.dup_acked} ooo={result.out_of_order} "
        f"recover={result.recover_s} catchup={result.catchup_s} injected={result.injected} "
        f"failures={result.failures} notes={result.notes[:2]} ({result.elapsed_s}s)")
    return result


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    raise KeyError(name)


__all__ = ["SCENARIOS", "Result", "Scenario", "by_name", "encode", "run"]
