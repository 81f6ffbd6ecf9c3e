"""PySpark version support: the check at import, the reader picked per runtime, the 4.0/4.1 reader's offsets.

The 4.0/4.1 reader (:mod:`kinesis_src.spark.stream_legacy`) runs here on the
fake Kinesis under whatever PySpark this venv has: it needs nothing newer
than 4.0. `make spark-matrix` runs it under real PySpark 4.0 and 4.1
(tests/spark/test_version_support.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fake_kinesis import FakeKinesis
from spark_driver_fakes import NoClaim, RecordedEnds
from spark_versions import RUNTIME  # tests/spark_versions.py

from kinesis_src.errors import ConfigurationError
from kinesis_src.positions import Position
from kinesis_src.spark import compat, source
from kinesis_src.spark.compat import SparkRuntime
from kinesis_src.spark.driver import StreamDriver
from kinesis_src.spark.offsets import Plan
from kinesis_src.spark.options import parse_options
from kinesis_src.spark.planner import BatchEnd
from kinesis_src.spark.stream_legacy import LegacyStreamReader

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing as model_listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing as model_listing

TOP = 2**128 - 1
S = "shardId-{:012d}".format
ROOT = Path(__file__).resolve().parents[2]


def one_shard(*sequences: int) -> FakeKinesis:
    kinesis = FakeKinesis()
    kinesis.create_stream("orders", listing=[model_listing(0, 0, TOP, starting="1")])
    put(kinesis, *sequences)
    return kinesis


def put(kinesis: FakeKinesis, *sequences: int) -> None:
    for q in sequences:
        kinesis.put_record("orders", f"k{q}", b"x", shard_id=S(0), sequence_number=str(q))


def legacy(kinesis: FakeKinesis, ends: dict[int, dict[str, BatchEnd]], **options: str) -> LegacyStreamReader:
    opts = parse_options({"streamName": "orders", "region": "us-east-1", "initialPosition": "trim_horizon", **options},
                         batch=False, environ={})
    reader = LegacyStreamReader(opts)
    reader._driver = StreamDriver(opts, kinesis=kinesis, progress=RecordedEnds(ends), claim=NoClaim())
    return reader


def caught_up(seq: str) -> BatchEnd:
    return BatchEnd(Position.after_sequence(seq), 1, False, "caught_up")


@pytest.mark.parametrize("version, minor", [("4.1.4", (4, 1)), ("4.2.0.dev1", (4, 2)), ("4.0.0rc1", (4, 0)), ("3.5.6", (3, 5))])
def test_minor_of_reads_release_and_pre_release_versions(version: str, minor: tuple[int, int]) -> None:
    assert compat.minor_of(version) == minor


def test_a_pyspark_before_4_0_is_refused_at_import_naming_its_version_and_the_range(tmp_path: Path) -> None:
    """PySpark 3.5 has no pyspark.sql.datasource: without the check the user gets a bare ModuleNotFoundError."""
    fake = tmp_path / "pyspark"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "3.5.6"\n')
    run = subprocess.run(
        [sys.executable, "-c", "from kinesis_src import KinesisDataSource"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": ""},
    )
    assert run.returncode != 0
    assert "ConfigurationError" in run.stderr, run.stderr
    assert "pyspark 3.5.6" in run.stderr and "pyspark>=4.0,<5" in run.stderr, run.stderr


def test_the_stream_reader_follows_the_runtimes_api(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = parse_options({"streamName": "orders", "region": "us-east-1"}, batch=False, environ={})
    monkeypatch.setattr(source, "runtime", lambda: SparkRuntime("4.1.4", trigger_api=False))
    assert type(source.stream_reader(opts)) is LegacyStreamReader
    if not RUNTIME.trigger_api:  # the 4.2 reader cannot load here (the next test shows the error)
        return
    monkeypatch.setattr(source, "runtime", lambda: SparkRuntime("4.3.0", trigger_api=True))
    assert type(source.stream_reader(opts)).__name__ == "KinesisStreamReader"


def test_the_4_2_reader_on_an_older_pyspark_fails_naming_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "runtime", lambda: SparkRuntime("4.1.4", trigger_api=False))
    with pytest.raises(ConfigurationError, match=r"kinesis_src\.spark\.stream needs PySpark 4\.2\+.*this is PySpark 4\.1\.4"):
        compat.require_trigger_api("kinesis_src.spark.stream")


def test_the_legacy_reader_plans_from_the_offset_it_returned_last() -> None:
    """Spark 4.0/4.1 ask latestOffset() with no start: a fresh start begins at initialOffset, then at the last answer."""
    kinesis = one_shard(1, 2, 3)
    ends: dict[int, dict[str, BatchEnd]] = {}
    reader = legacy(kinesis, ends)
    first = reader.latestOffset()
    plan = Plan.from_offset(first)
    assert plan.batch == 1 and plan.shards[S(0)].start == Position.trim_horizon()
    assert Plan.from_offset(reader.initialOffset()).run == plan.run  # Spark asks for it after: the same run
    assert len(reader.partitions(reader.initialOffset(), first)) == 1
    ends[1] = {S(0): caught_up("3")}
    put(kinesis, 4)
    second = reader.latestOffset()
    nxt = Plan.from_offset(second)
    assert (nxt.run, nxt.batch, nxt.shards[S(0)].start) == (plan.run, 2, Position.after_sequence("3"))
    ends[2] = {S(0): caught_up("4")}
    assert reader.latestOffset() == second  # nothing new: the same offset, so Spark runs no batch


def test_a_restarted_legacy_reader_continues_from_the_offset_spark_names_first() -> None:
    """A restart never calls initialOffset: Spark plans the offset log's last batch (end, end), then asks for more."""
    kinesis = one_shard(1, 2)
    ends: dict[int, dict[str, BatchEnd]] = {1: {S(0): caught_up("2")}}
    last = legacy(kinesis, ends).latestOffset()
    put(kinesis, 3)
    restarted = legacy(kinesis, ends)
    assert restarted.partitions(last, last) == []
    nxt = Plan.from_offset(restarted.latestOffset())
    assert (nxt.run, nxt.batch) == (Plan.from_offset(last).run, 2)
    assert nxt.shards[S(0)].start == Position.after_sequence("2")


def test_the_legacy_reader_applies_max_records_per_trigger_itself() -> None:
    kinesis = one_shard(1, 2, 3, 4, 5)
    capped = Plan.from_offset(legacy(kinesis, {}, maxRecordsPerTrigger="2").latestOffset())
    assert capped.shards[S(0)].max_records == 2
    uncapped = Plan.from_offset(legacy(kinesis, {}).latestOffset())
    assert uncapped.shards[S(0)].max_records == 100_000  # maxRecordsPerShard's default
