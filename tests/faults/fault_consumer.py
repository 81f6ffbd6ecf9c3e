"""The consumer engine of the fault campaign: three (by default) fault_worker.py processes, and their bill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from fault_context import FAILOVER, HERE, RENEW, REPO, SCAN, Context
from fault_results import Result
from worker_process import kill_group  # tests/worker_process.py

from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name

WORKER = HERE / "fault_worker.py"


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
