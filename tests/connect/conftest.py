"""Spark Connect: a local Connect server per test module, its clients, and the server's log on a failure.

The servers run inside the emulators' private network namespace
(``python localstack/launcher.py isolated -- pytest tests/connect``), bound
to loopback. ``connect_server`` has the package (its Python workers run this
interpreter, the endpoints and dummy credentials in their environment);
``bare_connect_server`` has every library but kinesis-src, as a cluster
nobody installed the package on.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connect_server import ConnectServer, package_zip, python_without_package, stop_quietly


@pytest.fixture(scope="session", autouse=True)
def _isolated_first(emulators: Any) -> Any:
    """Requested before the kit's endpoints: outside the namespace these tests skip with the launcher's hint."""
    return emulators


@contextlib.contextmanager
def connect_client(url: str) -> Iterator[Any]:
    """A new Connect client session; stopped after, and the process's Spark mode restored.

    A Connect session marks the whole process as Connect
    (``SPARK_CONNECT_MODE_ENABLED``): left set, later classic sessions in
    this pytest process (tests/spark) would refuse to start.
    """
    from pyspark.sql import SparkSession

    saved = dict(os.environ)
    spark = SparkSession.builder.remote(url).create()
    try:
        yield spark
    finally:
        stop_quietly(spark)
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def connect_server(emulators: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    with ConnectServer(sys.executable, emulators.env(), tmp_path_factory.mktemp("connect")) as server:
        yield server


@pytest.fixture(scope="module")
def connect_spark(connect_server: ConnectServer) -> Iterator[Any]:
    with connect_client(connect_server.url) as spark:
        yield spark


@pytest.fixture(scope="module")
def bare_connect_server(emulators: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    workdir = tmp_path_factory.mktemp("connect-bare")
    python = python_without_package(workdir / "venv")
    with ConnectServer(python, emulators.env(), workdir) as server:
        yield server


@pytest.fixture
def bare_spark(bare_connect_server: ConnectServer) -> Iterator[Any]:
    """A fresh session per test: what one test registers or ships must not help the next."""
    with connect_client(bare_connect_server.url) as spark:
        yield spark


@pytest.fixture(scope="module")
def source_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_zip(tmp_path_factory.mktemp("artifacts") / "kinesis_src.zip")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report ends with the tail of each Connect server log it used."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, ConnectServer):
            report.sections.append((f"Spark Connect server log ({value.log_path})", value.log_tail(120)))
