"""The peers: where each one's Python and worker script live, and how to start and stop a worker.

Every peer has its own virtualenv (benchmarks/peers/.venv-<package>; their
pins conflict: native-aws-kcl-py needs aiobotocore<3, kinesis-src pins
3.10.0), built from requirements.txt by :func:`setup`. kinesis-src runs from
the project's .venv, where it is installed editable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REQUIREMENTS = HERE / "requirements.txt"


@dataclass(frozen=True)
class Peer:
    """One library under test: its column title, package, venv and worker script."""

    name: str
    package: str  # PyPI name, as in requirements.txt ("" for kinesis-src)
    script: str
    replay_note: str = ""  # why it cannot read the replay endpoint ("" if it can)

    @property
    def python(self) -> Path:
        if not self.package:
            return ROOT / ".venv" / "bin" / "python"
        return HERE / f".venv-{self.package}" / "bin" / "python"

    def version(self) -> str:
        package = self.package or "kinesis-src"
        out = subprocess.run([str(self.python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                             capture_output=True, text=True)
        return out.stdout.strip() or f"not installed ({out.stderr.strip().splitlines()[-1:]})"


PEERS: dict[str, Peer] = {p.name: p for p in (
    Peer("kinesis-src", "", "worker_ours.py"),
    Peer("KCL 3 (MultiLangDaemon)", "kclpy-ext", "worker_kcl.py",
         replay_note="KCL's Kinesis client (Netty, AWS SDK v2) speaks HTTP/2 to a plain-HTTP endpoint and the "
                     "replay endpoint answers HTTP/1.1 only (KCL: 'First received frame was not SETTINGS'); "
                     "the multilang properties offer no protocol setting"),
    Peer("kcl-rs", "kcl-rs", "worker_kcl_rs.py"),
    Peer("async-kinesis", "async-kinesis", "worker_async_kinesis.py"),
    Peer("native-aws-kcl-py", "native-aws-kcl-py", "worker_native.py"),
)}


def requirement_lines() -> dict[str, str]:
    """package name -> its requirement line (with extras and exact version)."""
    lines = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            lines[line.split("[")[0].split("==")[0]] = line
    return lines


def setup() -> None:
    """Create each peer's venv and install its pinned requirement (needs the package index)."""
    for package, line in requirement_lines().items():
        venv = HERE / f".venv-{package}"
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", line], check=True)


@dataclass
class Worker:
    """A running worker process (its own process group), with its log file."""

    peer: Peer
    worker_id: str
    process: subprocess.Popen
    started: float  # time.time() at spawn
    log: Path

    def kill(self) -> None:
        """SIGKILL the whole group: the worker and, for KCL, its shard processes."""
        self._signal_group(signal.SIGKILL)

    def terminate(self, grace_s: float = 30.0) -> bool:
        """SIGTERM the worker, wait up to ``grace_s``; True if it exited by itself."""
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(grace_s)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait(10)
            return False

    def _signal(self, signum: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass
        self.process.wait(10)


def start_worker(peer: Peer, worker_id: str, *, stream: str, app: str, kinesis: str, dynamodb: str,
                 sink: Path, extra: list[str] | None = None, env: dict[str, str] | None = None) -> Worker:
    """Spawn ``peer``'s worker in its own session; stdout and stderr go to ``sink/<worker>.log``."""
    log = sink / f"{worker_id}.log"
    argv = [str(peer.python), str(HERE / peer.script), "--stream", stream, "--app", app,
            "--kinesis", kinesis, "--dynamodb", dynamodb, "--sink", str(sink), "--worker", worker_id,
            *(extra or [])]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, cwd=str(HERE), env={**os.environ, **(env or {})})
    return Worker(peer, worker_id, process, time.time(), log)
