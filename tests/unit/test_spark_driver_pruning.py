"""The Spark driver's per-shard lag forgets shards that left the stream's frontier for good.

A shard drained to SHARD_END (or trimmed away) is never read or probed
again: its last MillisBehindLatest must leave ``reportLatestOffset`` at
once. Its read counts stay: they are totals since the driver started, and
their sum is what the query read (tests/spark/test_progress_metrics.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fake_kinesis import FakeKinesis

# The 4.2+ stream reader (admission control, AvailableNow); PySpark 4.0/4.1 run the legacy reader
# (tests/unit/test_spark_compat.py) and `make oldest` runs this file on 4.0, where it skips.
pytest.importorskip("pyspark.sql.streaming.datasource", reason="needs PySpark 4.2+ (the 4.2 stream reader)")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_driver_fakes import RecordedEnds, stream_reader

from kinesis_src.positions import Position
from kinesis_src.spark import driver as driver_module
from kinesis_src.spark.offsets import Plan, ShardPlan
from kinesis_src.spark.planner import BatchEnd
from kinesis_src.spark.stream import KinesisStreamReader

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

TOP = 2**128 - 1
HALF = TOP // 2
S = "shardId-{:012d}".format


def generations(cycles: int) -> list[dict[str, Any]]:
    """A split then a merge, ``cycles`` times: full shard 3k splits into 3k+1 and 3k+2, merged into 3k+3.

    Every shard drains but the last full one, 3 * ``cycles``; shard n's records are numbered from 10n + 1.
    """
    def shard(n: int, lo: int, hi: int, parents: tuple[int, ...] = ()) -> dict[str, Any]:
        last = n == 3 * cycles
        return listing(n, lo, hi, parents, starting=str(10 * n + 1), ending=None if last else str(10 * n + 2))

    out = [shard(0, 0, TOP)]
    for k in range(cycles):
        full = 3 * k
        out += [shard(full + 1, 0, HALF, (full,)), shard(full + 2, HALF + 1, TOP, (full,)),
                shard(full + 3, 0, TOP, (full + 1, full + 2))]
    return out


def reader_over(shards: list[dict[str, Any]], progress: RecordedEnds) -> KinesisStreamReader:
    fake = FakeKinesis()
    fake.create_stream("orders", listing=shards, arn="arn:aws:kinesis:us-east-1:000000000000:stream/orders",
                       created=datetime(2026, 3, 1, tzinfo=UTC))
    return stream_reader(fake, progress.by_batch, initialPosition="trim_horizon")


def drained(n: int, lag: int) -> BatchEnd:
    """Shard n read to its end (one record, 10 bytes)."""
    return BatchEnd(Position.after_sequence(str(10 * n + 2)), 1, True, "shard_end", lag, byte_count=10)


def caught_up(n: int, lag: int = 0) -> BatchEnd:
    return BatchEnd(Position.after_sequence(str(10 * n + 1)), 1, False, "caught_up", lag, byte_count=10)


def latest(reader: KinesisStreamReader, start: Plan) -> Plan:
    return Plan.from_offset(reader.latestOffset(start.to_offset(), ReadAllAvailable()))


def test_a_drained_shards_lag_leaves_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "DISCOVERY_INTERVAL_S", 0.0)
    progress = RecordedEnds({1: {S(0): drained(0, lag=500)}})
    reader = reader_over(generations(1), progress)
    first = Plan(run="r", batch=1, shards={S(0): ShardPlan(Position.trim_horizon(), 10)})
    second = latest(reader, first)
    assert second.read == [S(1), S(2)]
    report = reader.reportLatestOffset()
    assert S(0) not in report["millisBehindLatest"]
    assert report["recordsRead"] == {S(0): 1} and report["bytesRead"] == {S(0): 10}  # its last batch, reported once
    progress.by_batch[2] = {S(1): drained(1, lag=0), S(2): caught_up(2)}
    latest(reader, second)
    report = reader.reportLatestOffset()
    assert sorted(report["millisBehindLatest"]) == [S(2)]
    assert report["recordsRead"] == {S(0): 1, S(1): 1, S(2): 1}  # totals: a drained shard's count stays
    assert sorted(report["bytesRead"]) == sorted(report["throttles"]) == sorted(report["retries"]) == [S(0), S(1), S(2)]


def test_over_many_reshards_the_lag_keeps_the_live_shard_and_the_counts_keep_every_shard_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "DISCOVERY_INTERVAL_S", 0.0)
    cycles = 20
    last = 3 * cycles
    progress = RecordedEnds({})
    reader = reader_over(generations(cycles), progress)
    start = Plan(run="r", batch=1, shards={S(0): ShardPlan(Position.trim_horizon(), 10)})
    while True:
        progress.by_batch[start.batch] = {
            sid: caught_up(last, lag=7) if sid == S(last) else drained(int(sid[-12:]), lag=7) for sid in start.read
        }
        if start.read == [S(last)]:
            break
        start = latest(reader, start)
        assert start.batch < 2 * cycles + 3
    latest(reader, start)
    driver = reader.driver
    assert sorted(driver.lag) == [S(last)] and set(driver._verified_at) <= {S(last)}
    assert sum(driver.records_read.values()) == len(driver.records_read) == last + 1  # totals: one record a shard
