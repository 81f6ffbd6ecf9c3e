"""One SparkSession per test module, inside the same private network namespace as the emulators.

``emulators`` is tests/conftest.py's adapter over the testing kit's session
endpoints (``kinesis_test_endpoints``); the session's Python workers get
their ``env()`` (endpoints, region, dummy credentials) through ``os.environ``.
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest


@pytest.fixture(scope="module")
def spark(emulators) -> Iterator[object]:
    from pyspark.sql import SparkSession

    saved = dict(os.environ)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    for key, value in emulators.env().items():
        os.environ[key] = value  # Python workers inherit the endpoint settings and dummy credentials
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kinesis-src-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
        os.environ.clear()  # later modules (unit tests with moto) must not see the emulators' endpoints
        os.environ.update(saved)
