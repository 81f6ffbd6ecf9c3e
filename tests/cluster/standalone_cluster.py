"""A Spark standalone cluster from pip's pyspark: a master and workers as separate JVMs, and spark-submit runs.

Everything binds loopback (``SPARK_LOCAL_IP=127.0.0.1``) on free ports and
runs inside the test session's private network namespace. Each process is
started in its own session, so stopping one by its PID also stops what it
started (a worker's executors, a driver's Python processes); the logs stay
under the test's directory and :meth:`StandaloneCluster.log_tails` prints
them when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def get_json(url: str, timeout_s: float = 2.0) -> Any:
    """The JSON at ``url``, or None while the server is not answering (starting, or gone)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback only
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


def stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM a process started in its own session (its group id is its PID), SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace_s)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:  # exited while we looked
        return []


def executor_pids(app_id: str) -> dict[str, int]:
    """The live executor JVMs of an application, found in /proc: executor id -> PID."""
    found: dict[str, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        args = _cmdline(pid)
        if EXECUTOR_CLASS in args and "--app-id" in args and args[args.index("--app-id") + 1] == app_id:
            found[args[args.index("--executor-id") + 1]] = int(pid)
    return found


@dataclass
class StandaloneCluster:
    """One master and ``workers`` workers of ``cores`` core(s) each, logs under ``log_dir``."""

    log_dir: Path
    env: Mapping[str, str]
    master_port: int
    master_ui_port: int
    workers: int = 2
    cores: int = 1
    worker_memory: str = "1g"
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str]) -> None:
        with open(self.log_dir / f"{name}.log", "w") as log:  # the child keeps its own descriptor
            self.procs[name] = subprocess.Popen(
                [str(SPARK_CLASS), *args], env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.log_dir,
            )

    def start(self) -> None:
        """Start the master and the workers; :meth:`alive_workers` says when they have registered."""
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)], self.env)
        for n in range(1, self.workers + 1):
            work_dir = self.log_dir / f"worker-{n}"
            work_dir.mkdir(exist_ok=True)
            self._spawn(f"worker-{n}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(self.cores),
                "--memory", self.worker_memory, "--webui-port", "0", "--work-dir", str(work_dir), self.url,
            ], self.env)

    def state(self) -> dict[str, Any] | None:
        """The master's status JSON (workers, applications), or None while it is not answering."""
        return get_json(f"http://127.0.0.1:{self.master_ui_port}/json/")

    def alive_workers(self) -> int:
        self.check_running()
        state = self.state() or {}
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def check_running(self) -> None:
        """AssertionError naming the daemon that exited, with its log's tail."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"spark {name} exited with {proc.returncode}:\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def log_tails(self) -> str:
        """The end of every daemon's log and of every executor's stderr, for a failed test's output."""
        parts = [f"--- {name} ---\n{self.tail(name)}" for name in self.procs]
        for stderr in sorted(self.log_dir.glob("worker-*/app-*/*/stderr")):
            text = "\n".join(stderr.read_text(errors="replace").splitlines()[-20:])
            parts.append(f"--- executor {stderr.parent.relative_to(self.log_dir)} ---\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Workers first (each takes its executors with it), then the master: each by its PID."""
        for name in sorted(self.procs, key=lambda n: n == "master"):
            stop_group(self.procs[name])


@dataclass
class Submission:
    """One ``spark-submit`` run (the driver: a JVM and its Python), its output in ``log``."""

    proc: subprocess.Popen
    log: Path
    ui_port: int

    @classmethod
    def start(cls, argv: list[str], env: Mapping[str, str], log: Path, ui_port: int) -> Submission:
        with open(log, "w") as handle:
            proc = subprocess.Popen(
                [str(SPARK_SUBMIT), *argv], env=dict(env), stdin=subprocess.DEVNULL, stdout=handle,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent,
            )
        return cls(proc, log, ui_port)

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the driver exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str) -> Any:
        """The driver's monitoring REST API (``/api/v1/...``), or None while it is not answering."""
        return get_json(f"http://127.0.0.1:{self.ui_port}/api/v1/{path.lstrip('/')}")

    def app_id(self) -> str | None:
        apps = self.api("applications")
        return apps[0]["id"] if apps else None

    def sigkill(self) -> None:
        """SIGKILL the driver JVM and everything in its session (its Python, the source's runner)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        stop_group(self.proc)
