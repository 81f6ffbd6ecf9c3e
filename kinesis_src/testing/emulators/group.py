"""``Emulators``: kinesis-mock, DynamoDB Local (and kinesalite), started together, stopped by PID.

Each gets a free port, its own process group and a temp log; leftovers are stopped at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import LauncherError
from .install import ensure_installed, node_modules_dir
from .names import (
    DEFAULT_REGION,
    DUMMY_ACCESS_KEY,
    DUMMY_SECRET_KEY,
    ENV_DYNAMODB_ENDPOINT,
    ENV_KINESALITE_ENDPOINT,
    ENV_KINESIS_ENDPOINT,
)
from .servers import RunningServer, ServerSpec, ensure_port_free, free_port, launch, stop_process_group, wait_until_ready
from .specs import dynamodb_spec, kinesalite_spec, kinesis_mock_spec

LOG = logging.getLogger("kinesis_src.launcher")

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


@dataclass(eq=False)
class Emulators:
    """Context manager running kinesis-mock, DynamoDB Local and optionally kinesalite."""

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
        """Stop every server (reverse start order); idempotent; the entries stay in ``servers``."""
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

    def _specs(self) -> list[ServerSpec]:
        """Build launch specs for the requested servers; fails fast on missing tools."""
        if self.node_modules is None:
            self.node_modules = ensure_installed(quiet=True) if self.install else node_modules_dir()
        specs: list[ServerSpec] = []
        if self.kinesis:
            specs.append(kinesis_mock_spec(self.node_modules, self.kinesis_port or free_port(), self.kinesis_settings))
        if self.dynamodb:
            specs.append(dynamodb_spec(self.node_modules, self.dynamodb_port or free_port(), self.dynamodb_jar))
        if self.kinesalite:
            specs.append(kinesalite_spec(self.node_modules, self.kinesalite_port or free_port()))
        if not specs:
            raise LauncherError("no emulator requested")
        return specs

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

    The emulators run for the ``with`` block; their settings go to ``os.environ`` (for Spark).
    """

    if os.environ.get(ENV_KINESIS_ENDPOINT):
        yield {k: v for k, v in os.environ.items() if k.startswith(("KINESIS_SRC_", "AWS_"))}
        return
    print("starting the embedded emulators (kinesis-mock, DynamoDB Local) ...", flush=True)
    with Emulators(kinesis=True, dynamodb=dynamodb) as running:
        os.environ.update(running.env())
        print(running.describe(), flush=True)
        yield running.env()
