"""A Spark standalone cluster (a master, two 1-core workers) per module, in the emulators' private namespace.

The cluster's processes run a Python without kinesis-src installed
(:func:`cluster_packaging.node_python`); the package reaches them only as a user ships
it: ``spark-submit --py-files kinesis_src.zip`` for the executors, and the
same zip on the driver's ``PYTHONPATH`` (client mode). Endpoints and dummy
credentials come from the kit's emulators (``emulators``, tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import launcher  # localstack/launcher.py, on sys.path through tests/conftest.py
import pytest
from cluster_packaging import importable, node_env, node_python, package_zip
from standalone_cluster import StandaloneCluster, Submission
from waiting import wait_for

CLUSTER_START_S = 120.0
JOB = Path(__file__).with_name("cluster_job.py")


@pytest.fixture(scope="session")
def kinesis_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_zip(tmp_path_factory.mktemp("shipped") / "kinesis_src.zip")


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nodes' Python: the dependencies, not kinesis-src (checked, so the test cannot pass by accident)."""
    python = node_python(tmp_path_factory.mktemp("node-python"))
    env = node_env(dict(os.environ), python)
    assert importable(python, "pyspark", env) and importable(python, "pyarrow", env)
    assert not importable(python, "kinesis_src", env), "the node Python must not have kinesis_src installed"
    return python


@pytest.fixture(scope="module")
def cluster_env(emulators, bare_python: Path) -> dict[str, str]:
    """The environment of every cluster process: the node Python, the emulators' endpoints, dummy credentials."""
    return node_env({**os.environ, **emulators.env()}, bare_python)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, cluster_env: dict[str, str],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """Master and two workers for one module (stopped after it); their logs are printed if a test of it failed."""
    failures_before = request.session.testsfailed
    running = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), cluster_env,
                                master_port=launcher.free_port(), master_ui_port=launcher.free_port())
    try:
        running.start()
        wait_for(lambda: running.alive_workers() == running.workers, CLUSTER_START_S, "two workers registered")
        yield running
    finally:
        running.stop()
        if request.session.testsfailed > failures_before:
            print(running.log_tails())


@pytest.fixture
def submit(cluster: StandaloneCluster, cluster_env: dict[str, str], kinesis_zip: Path,
           tmp_path: Path) -> Iterator[Callable[..., Submission]]:
    """``submit(*job_args, py_files=True)`` runs cluster_job.py with spark-submit; every run is stopped at the end."""
    started: list[Submission] = []

    def start(*job_args: str, py_files: bool = True) -> Submission:
        ui_port = launcher.free_port()
        argv = [
            "--master", cluster.url, "--driver-memory", "1g",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
            "--conf", "spark.cores.max=2", "--conf", f"spark.ui.port={ui_port}",
            "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.sql.streaming.fileSink.log.compactInterval=100000",
        ]
        if py_files:
            argv += ["--py-files", str(kinesis_zip)]
        env = {**cluster_env, "PYTHONPATH": str(kinesis_zip)}  # client mode: the driver's own Python processes
        run = Submission.start([*argv, str(JOB), *job_args], env, tmp_path / f"driver-{len(started) + 1}.log", ui_port)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()
