"""Secrets go nowhere: a Spark query and a Consumer run with canary credentials, then everything they wrote is searched.

Both engines run as real processes against the emulators (which accept any
credentials) with canary values in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
and AWS_SESSION_TOKEN, and kinesis_src logging at DEBUG. Afterwards every
log line (stdout and stderr of both, Spark's included), every file of the
query's checkpoint and output, and every raw item of both lease tables are
searched for the three canaries. A planted canary checks the search itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from kinesis_src.aws import KinesisClient
from kinesis_src.testing import KeyedProducer

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
CANARIES = {
    "AWS_ACCESS_KEY_ID": "AKIACANARYKEY7F3A9Q2Z",
    "AWS_SECRET_ACCESS_KEY": "canarySecret7f3a9q2zXyWvUtSrQpOnMlKjIhG",
    "AWS_SESSION_TOKEN": "canaryToken7f3a9q2z-session",
}
DEBUG_LOGGING = "import logging; logging.basicConfig(level=logging.WARNING); logging.getLogger('kinesis_src').setLevel(logging.DEBUG)"


def run_logged(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A process with kinesis_src's loggers at DEBUG (through a sitecustomize on its path), output into ``log``."""
    hook = log.parent / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(DEBUG_LOGGING + "\n")
    path = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))]))
    with open(log, "w") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(argv, env={**os.environ, **env, "PYTHONPATH": path}, stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)


def table_items(env: dict[str, str]) -> str:
    """Every raw item of every table on DynamoDB Local, as text (read with the dummy set-up credentials)."""
    client = boto3.client("dynamodb", endpoint_url=env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id="reader", aws_secret_access_key="reader")
    texts = []
    for name in client.list_tables()["TableNames"]:
        for page in client.get_paginator("scan").paginate(TableName=name):
            texts.append(json.dumps(page["Items"], default=str))
    return "\n".join(texts)


def found_canaries(texts: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(where, name) for where, text in texts.items() for name, value in CANARIES.items()
            if value.encode() in text]


def test_canary_credentials_appear_in_no_log_offset_progress_or_lease_item(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str], tmp_path: Path
) -> None:
    kinesis.create_stream(stream_name, 2)
    kinesis.wait_active(stream_name)
    KeyedProducer(kinesis, stream_name, keys=10).put_rounds(20)  # 200 records
    env = {**emulator_env, **CANARIES}

    job = run_logged([sys.executable, str(HERE / "stream_job.py"), "--stream", stream_name, "--out", str(tmp_path),
                      "--application", f"canary-{stream_name}", "--available-now"], env, tmp_path / "spark.log")
    assert job.wait(timeout=300) == 0, (tmp_path / "spark.log").read_text()[-3000:]

    worker = run_logged([sys.executable, str(HERE.parent / "integration" / "consumer_worker.py"), "--stream",
                         stream_name, "--application", f"canary-consumer-{stream_name}", "--worker-id", "w1"],
                        env, tmp_path / "consumer.log")
    deadline = time.monotonic() + 120
    while sum(len(json.loads(line).get("records", [])) for line in _events(tmp_path / "consumer.log")) < 200:
        assert time.monotonic() < deadline and worker.poll() is None, (tmp_path / "consumer.log").read_text()[-3000:]
        time.sleep(0.2)
    os.kill(worker.pid, signal.SIGTERM)
    assert worker.wait(timeout=60) == 0

    texts = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
             and "hook" not in p.parts}
    texts["lease tables"] = table_items(emulator_env).encode()
    assert any("checkpoint/offsets" in where for where in texts) and "DEBUG" in texts["consumer.log"].decode()
    assert f"canary-{stream_name}".encode() in texts["lease tables"]  # the query's items are among those searched
    assert found_canaries(texts) == []
    texts["planted"] = b"x" + CANARIES["AWS_SESSION_TOKEN"].encode()  # the search finds what is there
    assert found_canaries(texts) == [("planted", "AWS_SESSION_TOKEN")]


def _events(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith('{"event"')]
