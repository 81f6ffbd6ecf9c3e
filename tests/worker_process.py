"""A test's worker script run as a real process (killable, pausable), its JSON-lines events read by a thread.

The consumer, processing and key-range integration tests each run their own
worker script (``tests/integration/*_worker.py``); this is the one way they
start it, collect what it reports, and clean up after the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest


class WorkerProcess:
    """One worker process; every line it prints is one JSON event (``{"event": kind, ...}``)."""

    def __init__(
        self, worker_id: str, argv: list[str], env: dict[str, str], log_dir: Path, *, stdin: int = subprocess.DEVNULL
    ) -> None:
        """``stdin=subprocess.PIPE`` for a worker that takes commands (``self.proc.stdin``)."""
        self.worker_id = worker_id
        self.stderr_path = log_dir / f"{worker_id}.stderr"
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in kill()
        self.proc = subprocess.Popen(
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True,
            bufsize=1, start_new_session=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            event = json.loads(line)
            event["arrived"] = time.monotonic()
            with self._lock:
                self.events.append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    def started(self) -> bool:
        return bool(self.of("started"))

    def sigterm(self) -> float:
        sent = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)
        return sent

    def sigkill(self) -> float:
        sent = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGKILL)
        return sent

    def wait_exit(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(10)  # every line the process wrote is collected
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._stderr.close()

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr_path.read_text().splitlines()[-lines:])


W = TypeVar("W", bound=WorkerProcess)


@contextmanager
def spawned(request: pytest.FixtureRequest, make: Callable[..., W]) -> Iterator[Callable[..., W]]:
    """``start(...)`` makes a worker with ``make``; every one is killed when the test ends (stderr printed if it failed)."""
    started: list[W] = []
    failures_before = request.session.testsfailed

    def start(*args: str) -> W:
        worker = make(*args)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        failed = request.session.testsfailed > failures_before
        for worker in started:
            try:
                worker.kill()
            finally:
                if failed:
                    print(f"--- {worker.worker_id} stderr ---\n{worker.stderr_tail()}")


def kill_group(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGKILL a worker's whole process group, continued first (it may be paused), and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it exited in between
            pass
    proc.wait(timeout=timeout_s)
