"""A local Spark Connect server for tests, from pip's pyspark, and the Python environments it can run with.

The server is ``spark-submit --class ...SparkConnectServer`` in its own
process group, bound to loopback on a free port; it is stopped by that
group's id (SIGTERM, then SIGKILL), never by name. Its Python workers (the
data source's driver side and its tasks) run the interpreter given as
``python`` with the environment given as ``env``: that is where the source
finds its endpoints and credentials, not in the client's environment.
"""

from __future__ import annotations

import contextlib
import enum
import os
import site
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import launcher  # localstack/launcher.py, on sys.path through tests/conftest.py

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTUP_TIMEOUT_S = 180.0  # a JVM start on a loaded 2-core machine; ~10 s when idle
PACKAGES = ("kinesis_src", "lineage", "pyspark_kinesis")
# Variables a server must not inherit from the test process: a client's Connect mode, a path that would
# make a package importable whatever the server's Python has.
NOT_INHERITED = ("PYTHONPATH", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")


class ConnectServerError(RuntimeError):
    """The Connect server did not start; the message carries its command line and log tail."""


class ServerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


def spark_home() -> Path:
    """pip's pyspark is a Spark distribution: bin/spark-submit and the jars, the Connect server's included."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class ConnectServer:
    """One Spark Connect server (``local[2]``); use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, python: str, env: Mapping[str, str], workdir: Path) -> None:
        self.python = python
        self.env = dict(env)
        self.workdir = workdir  # the server's working directory, so also its Python workers'
        self.port = launcher.free_port()
        self.log_path = workdir / "connect-server.log"
        self.state = ServerState.NEW
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://{launcher.LOOPBACK}:{self.port}"

    def argv(self) -> list[str]:
        confs = {
            "spark.connect.grpc.binding.address": launcher.LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.streaming.fileSink.log.compactInterval": "10000",  # read_file_sink needs batch boundaries
        }
        conf_args = [arg for key, value in confs.items() for arg in ("--conf", f"{key}={value}")]
        return [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
                *conf_args, "--class", SERVER_CLASS, "spark-internal"]

    def process_env(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        return {**inherited, **self.env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": launcher.LOOPBACK,
                "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python}

    def start(self) -> ConnectServer:
        """Launch, then wait until the gRPC port answers; a server that dies or stays silent raises with its log."""
        if self.state is not ServerState.NEW:
            raise ConnectServerError(f"this server is {self.state.value}; create a new ConnectServer")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.argv(), cwd=self.workdir, env=self.process_env(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.state = ServerState.RUNNING
        try:
            self._wait_ready(STARTUP_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not launcher.port_is_open(self.port):
            assert self._process is not None
            if self._process.poll() is not None:
                raise self._failure(f"exited with code {self._process.returncode} before listening")
            if time.monotonic() > deadline:
                raise self._failure(f"not listening after {timeout_s:.0f}s")
            time.sleep(0.2)

    def _failure(self, reason: str) -> ConnectServerError:
        return ConnectServerError(
            f"Spark Connect server {reason}\n  command: {' '.join(self.argv())}\n  log: {self.log_path}\n"
            f"  log tail:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 60) -> str:
        return launcher.read_log_tail(self.log_path, lines)

    def stop(self) -> None:
        """SIGTERM the server's process group (the JVM and its Python workers), SIGKILL after 20 s; idempotent."""
        if self.state is ServerState.RUNNING and self._process is not None:
            launcher.stop_process_group(self._process, 20.0, name="spark-connect-server", slow_stop_expected=True)
        self.state = ServerState.STOPPED

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def python_without_package(dest: Path) -> str:
    """A venv with this environment's libraries (pyspark, boto3, pyarrow...) but not kinesis-src.

    Its site-packages lists ours in a ``.pth`` line: that adds the directory
    to ``sys.path`` without running the ``.pth`` files inside it, so the
    editable install of kinesis-src (a ``.pth`` there) stays out.
    """
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(dest)], check=True, capture_output=True)
    python = dest / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "host-libraries.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _check_importable(python, dest, ["pyspark", "boto3", "pyarrow"], expected=True)
    _check_importable(python, dest, list(PACKAGES), expected=False)
    return str(python)


def _check_importable(python: Path, cwd: Path, modules: list[str], expected: bool) -> None:
    probe = "import importlib.util, sys; print(all(importlib.util.find_spec(m) is not None for m in sys.argv[1:]))"
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    found = subprocess.run([str(python), "-c", probe, *modules], cwd=cwd, env=env,
                           check=True, capture_output=True, text=True).stdout.strip() == "True"
    if found != expected:
        raise ConnectServerError(f"{python}: expected {modules} {'importable' if expected else 'missing'}")


def package_zip(dest: Path) -> Path:
    """The source packages as one zip (what ``spark.addArtifacts(..., pyfile=True)`` ships), from this checkout."""
    import kinesis_src

    root = Path(kinesis_src.__file__).resolve().parents[1]
    with zipfile.ZipFile(dest, "w") as archive:
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                archive.write(path, path.relative_to(root))
    return dest


def stop_quietly(spark: Any, timeout_s: float = 60.0) -> None:
    """Stop a Connect client session without letting teardown hang or hide the test's own failure.

    ``spark.stop()`` removes any listener still registered, which can hang in
    PySpark's Connect client (SPARK-59623): it runs on a daemon thread and is
    abandoned after ``timeout_s`` with a warning. A server already gone is
    not an error here.
    """

    def stop() -> None:
        with contextlib.suppress(Exception):
            spark.stop()

    thread = threading.Thread(target=stop, name="connect-client-stop", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        warnings.warn(f"the Spark Connect client session did not stop within {timeout_s:.0f}s (SPARK-59623?)",
                      stacklevel=2)
