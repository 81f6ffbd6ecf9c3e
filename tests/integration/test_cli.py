"""The kinesis-src command against kinesis-mock, run as a real process."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from kinesis_src import AwsSettings
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.leases.model import Checkpoint, HashRange, Lease
from kinesis_src.leases.table import LeaseTable
from kinesis_src.testing import KeyedProducer, decode

pytestmark = pytest.mark.integration


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kinesis_src.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_shards_and_read_in_lineage_order(kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    producer = KeyedProducer(kinesis, stream_name, keys=8)
    producer.put_rounds(2)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)
    producer.put_rounds(2)

    shards = run_cli("shards", stream_name, env=emulator_env)
    assert shards.returncode == 0, shards.stderr
    lines = shards.stdout.splitlines()
    assert lines[1].startswith("shardId-000000000000") and "closed" in lines[1]
    assert "shardId-000000000000" in lines[2] and "open" in lines[2]

    graph_json = run_cli("shards", stream_name, "--json", env=emulator_env)
    assert json.loads(graph_json.stdout)

    read = run_cli("read", stream_name, "--no-progress", env=emulator_env)
    assert read.returncode == 0, read.stderr
    rows = [json.loads(line) for line in read.stdout.splitlines()]
    assert len(rows) == 32
    assert rows[0]["shardId"] == "shardId-000000000000"
    counters: dict[str, int] = {}
    for row in rows:
        key, n = decode(base64.b64decode(row["data"]))
        assert row["partitionKey"] == key
        assert row["subSequenceNumber"] == 0 and "explicitHashKey" not in row  # plain records, no aggregates
        assert n == counters.get(key, 0) + 1, f"{key} out of order"
        counters[key] = n


def test_missing_stream_and_bad_timestamp_exit_2_with_a_message(emulator_env: dict[str, str]) -> None:
    missing = run_cli("read", "no-such-stream", "--no-progress", env=emulator_env)
    assert missing.returncode == 2
    assert "'no-such-stream'" in missing.stderr and "Traceback" not in missing.stderr
    bad = run_cli("read", "whatever", "--from", "last tuesday", env=emulator_env)
    assert bad.returncode == 2
    assert "'last tuesday'" in bad.stderr and "ISO-8601" in bad.stderr


def run_cli_into_closed_pipe(*args: str, env: dict[str, str], lines: int) -> tuple[int, str]:
    """Run the CLI with stdout on a pipe whose reader goes away after ``lines`` lines, like ``| head``.

    With ``lines=0`` the reader is closed before the process starts, so even
    a short output (or the flush at exit) meets a closed pipe, deterministically.
    """
    if lines == 0:
        read_end, write_end = os.pipe()
        os.close(read_end)
        with subprocess.Popen(
            [sys.executable, "-m", "kinesis_src.cli", *args],
            env={**os.environ, **env}, stdout=write_end, stderr=subprocess.PIPE, text=True,
        ) as proc:
            os.close(write_end)
            _, stderr = proc.communicate(timeout=120)
        return proc.returncode, stderr
    with subprocess.Popen(
        [sys.executable, "-m", "kinesis_src.cli", *args],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        for _ in range(lines):
            assert proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        proc.wait(timeout=120)
    return proc.returncode, stderr


def _assert_quiet_exit(status: int, stderr: str) -> None:
    assert status in (0, 141), stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr, stderr


def test_help_into_a_closed_pipe_exits_quietly() -> None:
    _assert_quiet_exit(*run_cli_into_closed_pipe("--help", env={}, lines=0))


def test_read_into_a_pipe_closed_after_one_line_exits_quietly(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]
) -> None:
    """``kinesis-src read STREAM | head -1``: far more output than a pipe buffer holds, reader gone after one line."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    kinesis.put_records(stream_name, [(f"k{i % 8}", b"x" * 600) for i in range(500)])  # ~450 kB of JSON lines
    _assert_quiet_exit(*run_cli_into_closed_pipe("read", stream_name, "--no-progress", env=emulator_env, lines=1))


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_shards_into_a_closed_pipe_exits_quietly(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str], flags: tuple[str, ...]
) -> None:
    """Output smaller than a pipe buffer: the broken pipe shows only when stdout is flushed."""
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    _assert_quiet_exit(*run_cli_into_closed_pipe("shards", stream_name, *flags, env=emulator_env, lines=0))


def test_lineage_and_leases_as_real_processes(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]
) -> None:
    """``lineage`` after a split (JSON and the tree), ``leases`` of a table a consumer would have written."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    KeyedProducer(kinesis, stream_name, keys=4).put_rounds(2)
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)

    tree = run_cli("lineage", stream_name, "--count", env=emulator_env)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0] == f"stream {stream_name}: 2 open, 1 closed shards; retention 24 h"
    assert [line.split()[0] for line in lines[2:]] == ["shardId-000000000000", "├─", "└─"]
    assert lines[2].split()[-2] == "8"  # every record went to the parent, before the split (--count)
    doc = json.loads(run_cli("lineage", stream_name, "--json", env=emulator_env).stdout)
    assert [s["state"] for s in doc["shards"]] == ["closed", "open", "open"]

    table = LeaseTable(DynamoDBClient(AwsSettings.from_env()), "kinesis-src-cli-app", "cli-app", stream_name)
    table.ensure_table()
    table.register_worker("worker-1")
    graph_shards = [s["shardId"] for s in doc["shards"]]
    for sid, shard in zip(graph_shards, doc["shards"]):
        hash_range = HashRange(int(shard["hashRange"]["start"]), int(shard["hashRange"]["end"]))
        table.create_lease(Lease(sid, Checkpoint.trim_horizon(), hash_range, parent_shard_ids=tuple(shard["parents"]),
                                 owner="worker-1" if sid == graph_shards[0] else None, counter=1))
    shown = run_cli("leases", "cli-app", "--stream", stream_name, env=emulator_env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout.splitlines()
    assert out[0].endswith("3 leases (1 owned, 0 finished), 1 workers")
    rows = {line.split()[0]: line.split() for line in out[2:5]}
    assert rows["shardId-000000000000"][1] == "worker-1" and rows["shardId-000000000000"][4].isdigit()  # a lag, not "-"
    assert "waiting:" in " ".join(rows["shardId-000000000001"])  # its parent has not reached SHARD_END
    missing = run_cli("leases", "nobody", "--stream", stream_name, env=emulator_env)
    assert missing.returncode == 2 and "kinesis-src-nobody" in missing.stderr and "Traceback" not in missing.stderr


def test_lineage_into_a_closed_pipe_exits_quietly(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]
) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    _assert_quiet_exit(*run_cli_into_closed_pipe("lineage", stream_name, env=emulator_env, lines=0))
