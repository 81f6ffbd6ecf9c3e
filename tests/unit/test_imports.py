"""What importing a part of kinesis-src pulls in: the sync paths (Spark, the CLI) never load aiobotocore.

Each check runs in a fresh interpreter, since this process has long since
imported everything. A Spark streaming query starts a fresh Python process
on the driver for its reader, so whatever ``kinesis_src.spark.stream``
imports is paid at every query start (docs/performance.md, issue #12).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from spark_versions import STREAM_MODULE  # tests/spark_versions.py

import kinesis_src

ASYNC_MODULES = ("aiobotocore", "aiohttp")


def modules_after(statement: str) -> set[str]:
    """The names in ``sys.modules`` of a fresh interpreter after running ``statement``."""
    script = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "statement",
    [
        "import kinesis_src",
        f"import {STREAM_MODULE}",
        "import kinesis_src.spark.tasks",
        "from kinesis_src import read_table, KeyRange, Position",
        "from kinesis_src.aws import KinesisClient, DynamoDBClient, FanOut",
        "import kinesis_src.cli",
    ],
)
def test_sync_paths_do_not_import_the_async_stack(statement: str) -> None:
    loaded = modules_after(statement)
    assert "kinesis_src" in loaded
    assert not loaded & set(ASYNC_MODULES), f"{statement!r} imported {sorted(loaded & set(ASYNC_MODULES))}"


def test_importing_the_package_imports_no_consumer_and_no_pyspark() -> None:
    loaded = modules_after("import kinesis_src")
    assert "kinesis_src.consumer" not in loaded
    assert "pyspark" not in loaded


def test_spark_stream_does_not_import_the_consumer() -> None:
    assert "kinesis_src.consumer" not in modules_after(f"import {STREAM_MODULE}")


def test_every_public_name_resolves() -> None:
    """``__all__`` is the public surface: each name is importable, and ``dir()`` lists it."""
    for name in kinesis_src.__all__:
        assert getattr(kinesis_src, name) is not None, name
        assert name in dir(kinesis_src)
    assert kinesis_src.KeyRange.__name__ == "KeyRange"
    assert set(kinesis_src.__all__) == set(kinesis_src._EXPORTS)  # one list kept by hand, one map: in step
    from kinesis_src import aws

    assert set(aws.__all__) == set(aws._EXPORTS)
    for name in aws.__all__:
        assert getattr(aws, name) is not None, name


def test_every_public_name_resolves_in_a_fresh_process() -> None:
    """``from kinesis_src import *`` and each name by itself, before anything else imported them."""
    names = ", ".join(kinesis_src.__all__)
    loaded = modules_after(f"from kinesis_src import *\nfrom kinesis_src import {names}")
    assert "kinesis_src.consumer" in loaded  # the star import did reach the lazy names


def test_the_async_names_still_resolve() -> None:
    loaded = modules_after("from kinesis_src.aws import AsyncFanOut\nfrom kinesis_src import Consumer")
    assert "aiobotocore" in loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        kinesis_src.NoSuchThing  # noqa: B018
    from kinesis_src import aws

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        aws.NoSuchThing  # noqa: B018


def test_the_public_face_is_the_documented_list() -> None:
    """docs/api.md's table is ``__all__``; the internals once exported stay importable from their modules."""
    import re  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", doc, re.MULTILINE))
    assert documented == set(kinesis_src.__all__)
    assert "Batch" in kinesis_src.__all__ and "LeaseCoordinator" not in kinesis_src.__all__
    from kinesis_src.leases.coordinator import LeaseCoordinator  # noqa: PLC0415
    from kinesis_src.retrieval.polling import ShardReader  # noqa: PLC0415

    assert LeaseCoordinator and ShardReader


def test_the_kinesis_client_lives_in_the_aws_sub_package() -> None:
    """``KinesisClient`` serves tests and tooling that create streams: ``kinesis_src.aws`` has it, the top level not."""
    from pathlib import Path  # noqa: PLC0415

    from kinesis_src.aws import KinesisClient  # noqa: PLC0415
    from kinesis_src.aws.kinesis import KinesisClient as Defined  # noqa: PLC0415

    assert KinesisClient is Defined
    assert "KinesisClient" not in kinesis_src.__all__
    with pytest.raises(AttributeError, match="no attribute 'KinesisClient': import it from kinesis_src.aws"):
        kinesis_src.KinesisClient  # noqa: B018
    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert "`kinesis_src.aws.KinesisClient`" in doc
