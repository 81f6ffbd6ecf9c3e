"""The kinesis-src command against kinesis-mock, run as a real process."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from kinesis_src import KinesisClient
from kinesis_src.workload import KeyedProducer, decode

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
        assert n == counters.get(key, 0) + 1, f"{key} out of order"
        counters[key] = n


def test_missing_stream_and_bad_timestamp_exit_2_with_a_message(emulator_env: dict[str, str]) -> None:
    missing = run_cli("read", "no-such-stream", "--no-progress", env=emulator_env)
    assert missing.returncode == 2
    assert "'no-such-stream'" in missing.stderr and "Traceback" not in missing.stderr
    bad = run_cli("read", "whatever", "--from", "last tuesday", env=emulator_env)
    assert bad.returncode == 2
    assert "'last tuesday'" in bad.stderr and "ISO-8601" in bad.stderr
