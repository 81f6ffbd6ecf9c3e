"""Bounded window reads and the export command against real kinesis-mock, through a split and a merge."""

from __future__ import annotations

import base64
import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from waiting import wait_for  # tests/waiting.py

from kinesis_src import read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.arrow import ARROW_SCHEMA
from kinesis_src.cli import main
from kinesis_src.discovery import ShardDiscovery
from kinesis_src.errors import StreamNotFoundError
from kinesis_src.positions import format_timestamp
from kinesis_src.testing import KeyedProducer, decode, split_then_merge

pytestmark = pytest.mark.integration

KEYS = 20
ROUNDS = 4  # per phase: before the split, between split and merge, after the merge



def positions(table: pa.Table) -> list[tuple[str, str]]:
    return list(zip(table.column("shardId").to_pylist(), table.column("sequenceNumber").to_pylist()))


def assert_keys_in_write_order(table: pa.Table) -> None:
    last: dict[str, int] = {}
    for data, shard in zip(table.column("data").to_pylist(), table.column("shardId").to_pylist()):
        key, n = decode(data)
        assert n > last.get(key, 0), f"{key}: {n} (in {shard}) after {last[key]}"
        last[key] = n


def assert_parents_before_children(kinesis: KinesisClient, stream: str, table: pa.Table) -> None:
    discovery = ShardDiscovery(kinesis, stream)
    discovery.refresh()
    shards = table.column("shardId").to_pylist()
    first = {s: shards.index(s) for s in set(shards)}
    last = {s: len(shards) - 1 - shards[::-1].index(s) for s in set(shards)}
    for child in first:
        for parent in discovery.graph.parents(child):
            if parent in last:
                assert last[parent] < first[child], f"a row of {child} came before the end of its parent {parent}"


def test_a_window_through_a_split_and_a_merge_has_exactly_its_records_in_lineage_order(
    kinesis: KinesisClient, stream_name: str
) -> None:
    producer = KeyedProducer(kinesis, stream_name, keys=KEYS)
    split_then_merge(kinesis, stream_name, producer, rounds=ROUNDS)
    full = read_table(stream_name, kinesis=kinesis, progress=False)
    assert full.num_rows == producer.acknowledged == 3 * ROUNDS * KEYS

    # Bounds are arrival times of real records (the server's clock): the middle
    # of the pre-split phase and the middle of the post-merge phase.
    arrivals = full.column("approximateArrivalTimestamp").to_pylist()
    ordered = sorted(arrivals)
    start, end = ordered[ROUNDS * KEYS // 2], ordered[-ROUNDS * KEYS // 2]
    window = read_table(stream_name, format_timestamp(start), end, kinesis=kinesis, progress=False)

    expected = {p for p, ts in zip(positions(full), arrivals) if start <= ts < end}
    assert set(positions(window)) == expected and window.num_rows == len(expected)
    got_times = window.column("approximateArrivalTimestamp").to_pylist()
    assert start in got_times and end not in got_times  # the bounds hit real records: inclusive start, exclusive end
    assert 0 < len(expected) < full.num_rows
    shards = set(window.column("shardId").to_pylist())
    assert shards & {"shardId-000000000000", "shardId-000000000001"}, "no pre-split parent in the window"
    assert shards & {"shardId-000000000002", "shardId-000000000003"}, "no split child in the window"
    assert "shardId-000000000004" in shards, "no merge child in the window"
    assert window.schema == ARROW_SCHEMA
    assert_keys_in_write_order(window)
    assert_parents_before_children(kinesis, stream_name, window)


def test_end_latest_is_the_call_time_even_while_records_keep_arriving(
    kinesis: KinesisClient, stream_name: str
) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=10)
    worker = threading.Thread(target=producer.run_until_stopped, args=(10_000,), daemon=True)
    worker.start()
    try:
        wait_for(lambda: producer.acknowledged >= 100, what="the producer to get going")
        called = datetime.now(timezone.utc)
        window = read_table(stream_name, kinesis=kinesis, progress=False)
        returned = datetime.now(timezone.utc)
        then = producer.acknowledged  # a round may be in flight; the one after it starts after `returned`
        wait_for(lambda: producer.acknowledged >= then + 2 * producer.keys, what="records after the read")
    finally:
        producer.stop()
        worker.join(timeout=60)
    full = read_table(stream_name, kinesis=kinesis, progress=False)
    arrivals = full.column("approximateArrivalTimestamp").to_pylist()
    # The cut was taken between `called` and `returned`: everything before the
    # call is in, nothing from after the read; records kept arriving meanwhile.
    before = {p for p, ts in zip(positions(full), arrivals) if ts < called}
    until_return = {p for p, ts in zip(positions(full), arrivals) if ts < returned}
    assert before <= set(positions(window)) <= until_return
    assert len(before) >= 100 and max(arrivals) >= returned
    assert_keys_in_write_order(window)


def test_a_missing_stream_raises_stream_not_found(kinesis: KinesisClient) -> None:
    with pytest.raises(StreamNotFoundError, match="'no-such-stream'"):
        read_table("no-such-stream", kinesis=kinesis, progress=False)


def test_export_to_parquet_and_jsonl(
    kinesis: KinesisClient,
    stream_name: str,
    emulator_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=16)
    producer.put_rounds(2)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)
    producer.put_rounds(2)
    expected = read_table(stream_name, kinesis=kinesis, progress=False)
    shards = len(set(expected.column("shardId").to_pylist()))
    newest = max(expected.column("approximateArrivalTimestamp").to_pylist())
    end = format_timestamp(newest + timedelta(microseconds=1))  # the end is exclusive

    parquet = tmp_path / "window.parquet"
    args = ["export", stream_name, "--start", "earliest", "--end", end, "--output", str(parquet), "--no-progress"]
    assert main(args) == 0
    summary = capsys.readouterr().err.strip()
    assert summary == f"kinesis-src: exported 64 records from {shards} shards to {parquet} (parquet)"
    assert pq.read_table(parquet).equals(expected)

    jsonl = tmp_path / "window.json"
    assert main(["export", stream_name, "-o", str(jsonl), "--format", "jsonl", "--no-progress"]) == 0
    assert f"exported 64 records from {shards} shards to {jsonl} (jsonl)" in capsys.readouterr().err
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(r["shardId"], r["sequenceNumber"]) for r in rows] == positions(expected)
    assert [base64.b64decode(r["data"]) for r in rows] == expected.column("data").to_pylist()
    # Line for line what the `read` command prints for the same (whole) stream.
    read_out = tmp_path / "read.jsonl"
    assert main(["read", stream_name, "--output", str(read_out), "--no-progress"]) == 0
    assert jsonl.read_text() == read_out.read_text()
    read_out.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["window.json", "window.parquet"]  # no temporary files left


def test_export_errors_exit_2_with_one_line(
    emulator_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "w.parquet")
    assert main(["export", "no-such-stream", "-o", out, "--no-progress"]) == 2
    assert "'no-such-stream'" in capsys.readouterr().err
    assert main(["export", "s", "-o", str(tmp_path / "w.csv")]) == 2
    assert "--format parquet|jsonl" in capsys.readouterr().err
    assert main(["export", "s", "-o", out, "--start", "2026-01-02T00:00:00Z", "--end", "2026-01-01T00:00:00Z"]) == 2
    err = capsys.readouterr().err
    assert "end '2026-01-01T00:00:00Z'" in err and "start '2026-01-02T00:00:00Z'" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())
