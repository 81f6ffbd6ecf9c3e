"""The Spark engine of the fault campaign: spark_job.py as a process, and its committed output's bill."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from fault_context import HERE, REPO, Context
from fault_results import Result
from worker_process import kill_group  # tests/worker_process.py

from kinesis_src.testing import decode

SPARK_JOB = HERE / "spark_job.py"


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
