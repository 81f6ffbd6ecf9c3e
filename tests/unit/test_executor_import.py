"""A Spark executor whose Python lacks kinesis-src gets an error naming the executor and how to ship the package.

Spark pickles its read function, which holds the data source and the
reader, on the driver and unpickles it in each task's Python worker. Here the "executor" is this
interpreter run with ``-S`` from an empty directory, with only the venv's
site-packages on its path: pyspark and the other dependencies import,
kinesis_src does not (its editable install's ``.pth`` is not read), as on a
node where the package was neither installed nor shipped with ``--py-files``.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark import cloudpickle  # noqa: E402

from kinesis_src.spark.batch import KinesisBatchReader  # noqa: E402
from kinesis_src.spark.options import parse_options  # noqa: E402
from kinesis_src.spark.source import KinesisDataSource, stream_reader  # noqa: E402

OPTIONS = {"streamName": "orders", "region": "us-east-1", "endpointUrl": "http://127.0.0.1:4566"}
# What a standalone worker gives its executors' Python workers (the executor id is in the log URL).
EXECUTOR_ENV = {"SPARK_LOG_URL_STDERR": "http://127.0.0.1:8081/logPage/?appId=app-1&executorId=7&logType=stderr"}


def readers() -> list[object]:
    return [KinesisBatchReader(parse_options(OPTIONS, batch=True)), stream_reader(parse_options(OPTIONS, batch=False))]


def read_func(reader: object) -> object:
    """A function holding the data source and a reader, as PySpark's ``data_source_read_func`` does."""
    data_source = KinesisDataSource(OPTIONS)

    def data_source_read_func() -> tuple[object, object]:
        return data_source, reader

    return data_source_read_func


def unpickle_without_the_package(payload: bytes, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Unpickle ``payload`` in a Python that has the dependencies but not kinesis_src; its stderr shows the error."""
    (tmp_path / "payload.pickle").write_bytes(payload)
    site = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    code = (
        f"import sys; sys.path[:0] = {site!r}\n"
        "import importlib.util, pickle\n"
        "assert importlib.util.find_spec('kinesis_src') is None, 'kinesis_src must not be importable here'\n"
        "pickle.loads(open('payload.pickle', 'rb').read())\n"
    )
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("index", [0, 1], ids=["batch reader", "stream reader"])
def test_an_executor_without_the_package_names_itself_and_the_fix(index: int, tmp_path: Path) -> None:
    result = unpickle_without_the_package(cloudpickle.dumps(read_func(readers()[index])), tmp_path, EXECUTOR_ENV)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: kinesis-src cannot be imported on Spark executor 7"), result.stderr
    for fix in ("--py-files", "pip install kinesis-src", "--archives", "docs/spark-cluster.md"):
        assert fix in last, last


def test_the_message_names_the_host_and_directory_when_spark_gives_no_executor_id(tmp_path: Path) -> None:
    result = unpickle_without_the_package(cloudpickle.dumps(read_func(readers()[0])), tmp_path, {})
    last = result.stderr.strip().splitlines()[-1]
    assert "cannot be imported on Spark executor" in last and f"working directory {tmp_path}" in last, last


@pytest.mark.parametrize("index", [0, 1], ids=["batch reader", "stream reader"])
def test_a_reader_round_trips_where_the_package_is_installed(index: int) -> None:
    reader = readers()[index]
    data_source, restored = cloudpickle.loads(cloudpickle.dumps(read_func(reader)))()
    assert isinstance(data_source, KinesisDataSource) and data_source.options == OPTIONS
    assert type(restored) is type(reader)
    assert restored.options == reader.options
    assert vars(restored).keys() == reader.__getstate__().keys()


def test_an_executor_missing_a_compiled_dependency_is_told_to_install_it_not_to_ship_a_zip(tmp_path: Path) -> None:
    """kinesis_src travels with --py-files, but msgspec (compiled) is not on the node: a zip cannot fix that."""
    (tmp_path / "payload.pickle").write_bytes(cloudpickle.dumps(read_func(readers()[0])))
    site = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(Path(__file__).resolve().parents[2])]
    code = (
        f"import sys; sys.path[:0] = {site!r}; sys.modules['msgspec'] = None\n"
        "import pickle\n"
        "pickle.loads(open('payload.pickle', 'rb').read())\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=EXECUTOR_ENV, capture_output=True,
                            text=True, timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: kinesis-src's dependency msgspec cannot be imported on Spark executor 7"), last
    assert "pip install kinesis-src[spark]" in last and "--archives" in last and "--py-files" not in last, last
