"""One emulator process: how to launch it, tell it is ready, read its log and stop it by PID.

Each runs in its own session with a log file: a failure shows its tail, a stop reaches helpers.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ServerStartError
from .install import tail
from .names import DEFAULT_REGION, DUMMY_ACCESS_KEY, LOOPBACK

LOG = logging.getLogger("kinesis_src.launcher")


def free_port() -> int:
    """A free TCP port on loopback (a server that loses the race exits early, showing its log)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(port: int, name: str) -> None:
    """Fail fast if ``port`` has a listener: the readiness probe would otherwise
    talk to that other server and report ours ready while it crashes on bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT leftovers
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            raise ServerStartError(f"{name}: port {port} is already in use ({exc.strerror})") from exc


def port_is_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def probe_aws_json(port: int, target: str, content_type: str, timeout: float = 2.0) -> int | None:
    """POST an empty AWS JSON-protocol request; the HTTP status (any proves it is up), or None."""

    headers = {
        "Content-Type": content_type,
        "X-Amz-Target": target,
        "X-Amz-Date": "20240101T000000Z",
        "Authorization": (
            f"AWS4-HMAC-SHA256 Credential={DUMMY_ACCESS_KEY}/20240101/{DEFAULT_REGION}/"
            "probe/aws4_request, SignedHeaders=host;x-amz-date, Signature=0"
        ),
    }
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request("POST", "/", body=b"{}", headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def read_log_tail(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """Tail of a server log without reading a possibly huge file whole."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"    <log unreadable: {exc}>"
    return tail(data, lines)


@dataclass(frozen=True)
class ServerSpec:
    """How to launch one emulator and how to tell it is ready."""

    name: str
    argv: list[str]
    port: int
    probe_target: str
    probe_content_type: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    stop_grace: float = 10.0  # seconds between SIGTERM and SIGKILL
    slow_stop_expected: bool = False  # log a SIGKILL at debug level, not as a warning

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@dataclass
class RunningServer:
    """A launched emulator process plus what was learned while starting it."""

    spec: ServerSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    launched_at: float
    ready_seconds: float | None = None
    ready_status: int | None = None
    stopped: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def failure(self, reason: str) -> ServerStartError:
        """Build an error carrying the command line and log tail, so CI logs are self-explanatory."""
        return ServerStartError(
            f"{self.spec.name} {reason}\n  command: {shlex.join(self.spec.argv)}\n"
            f"  port: {self.spec.port}\n  log: {self.log_path}\n  log tail:\n{read_log_tail(self.log_path)}"
        )

    def poll_ready(self) -> bool:
        """One readiness attempt; raises if the process already died."""
        code = self.process.poll()
        if code is not None:
            raise self.failure(f"exited with code {code} before becoming ready")
        status = probe_aws_json(self.spec.port, self.spec.probe_target, self.spec.probe_content_type)
        if status is None:
            return False
        self.ready_seconds = time.monotonic() - self.launched_at
        self.ready_status = status
        return True


def launch(spec: ServerSpec, log_dir: Path) -> RunningServer:
    """Start a server in its own session so the whole group can be signalled."""
    log_path = log_dir / f"{spec.name}.log"
    env = {**os.environ, **spec.env}
    LOG.debug("starting %s: %s", spec.name, shlex.join(spec.argv))
    # The child keeps its own copy of the log fd; ours can close at once.
    with open(log_path, "ab") as log:
        log.write(f"$ {shlex.join(spec.argv)}\n".encode())
        log.flush()
        try:
            process = subprocess.Popen(
                spec.argv,
                cwd=spec.cwd or log_dir,  # DynamoDB Local writes metadata into its cwd
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ServerStartError(f"{spec.name}: cannot execute {shlex.join(spec.argv)}: {exc}") from exc
    return RunningServer(spec, process, log_path, time.monotonic())


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 10.0, *,
                       name: str = "process", slow_stop_expected: bool = False) -> None:
    """SIGTERM the process group (forked helpers too), wait up to ``timeout``, then SIGKILL it."""
    if process.poll() is not None:
        return  # exited and reaped earlier: its pid may belong to someone else by now
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        LOG.log(logging.DEBUG if slow_stop_expected else logging.WARNING,
                "%s (pid %d) still running %.1fs after SIGTERM; sending SIGKILL", name, pgid, timeout)
    # Sweep group members that outlived the leader (none for these servers, normally).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait()


def wait_until_ready(servers: Sequence[RunningServer], timeout: float, interval: float = 0.05) -> None:
    """Poll pending servers round-robin (fair startup times) until all answer or time is up."""
    deadline = time.monotonic() + timeout
    pending = list(servers)
    while pending:
        pending = [server for server in pending if not server.poll_ready()]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise pending[0].failure(f"not ready after {timeout:.0f}s")
        time.sleep(interval)
