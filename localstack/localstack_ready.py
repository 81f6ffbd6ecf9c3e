"""When a host-mode LocalStack is ready: its gateway answers, then its Kinesis engine does.

LocalStack starts its Kinesis engine (kinesis-mock, under node) lazily, on
an account's first Kinesis call, and holds that call until the engine is up
(:func:`engine_start_limit_s`, LocalStack's own limit). On a loaded machine
that is longer than a short probe waits, so a run is ready only once one
ListStreams, signed with the dummy key the tests use (account
000000000000), is answered 200 by the engine: the tests' first call then
finds it running. Stdlib only; used by ``localstack_host.py``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import launcher

KINESIS_TARGET = "Kinesis_20131202.ListStreams"
KINESIS_CONTENT_TYPE = "application/x-amz-json-1.1"
DYNAMODB_TARGET = "DynamoDB_20120810.ListTables"
DYNAMODB_CONTENT_TYPE = "application/x-amz-json-1.0"

ENGINE_START_LIMIT_S = 60.0  # LocalStack 2026.3.0's KinesisServerManager.default_startup_timeout
ENGINE_SOURCE = "localstack/services/kinesis/kinesis_mock_server.py"
POLL_S = 0.1


def engine_start_limit_s(venv: Path) -> float:
    """How long LocalStack holds a Kinesis call while its engine starts, read from its installed source."""
    for source in sorted(venv.glob(f"lib/python3*/site-packages/{ENGINE_SOURCE}")):
        found = re.search(r"default_startup_timeout\s*=\s*([0-9.]+)", source.read_text())
        if found:
            return float(found.group(1))
    return ENGINE_START_LIMIT_S


def wait_for_kinesis(server: launcher.RunningServer, deadline: float, engine_limit_s: float) -> None:
    """Until the gateway accepts connections, then until the Kinesis engine answers ListStreams 200.

    The engine probe waits longer than LocalStack holds the call that
    starts the engine, so that call's answer is seen rather than abandoned.
    Raises at ``deadline``, naming the engine and the log. ``ready_seconds``
    and ``ready_status`` then describe the engine's answer.
    """
    while not launcher.port_is_open(server.spec.port):
        _check_alive(server)
        _check_time(server, deadline, "its gateway did not accept connections")
        time.sleep(POLL_S)
    status = _probe(server, KINESIS_TARGET, KINESIS_CONTENT_TYPE, deadline, engine_limit_s + 15.0)
    while status != 200:
        _check_time(server, deadline, _engine_late(status, server.log_path))
        time.sleep(POLL_S)
        status = _probe(server, KINESIS_TARGET, KINESIS_CONTENT_TYPE, deadline, engine_limit_s + 15.0)
    server.ready_status = status
    server.ready_seconds = time.monotonic() - server.launched_at


def wait_for_dynamodb(server: launcher.RunningServer, deadline: float) -> None:
    """Until LocalStack's DynamoDB (a JVM it starts on the first DynamoDB call) answers ListTables 200."""
    while _probe(server, DYNAMODB_TARGET, DYNAMODB_CONTENT_TYPE, deadline, 30.0) != 200:
        _check_time(server, deadline, "its DynamoDB (DynamoDB Local, started on the first DynamoDB call) "
                                      "did not answer ListTables 200")
        time.sleep(POLL_S)


def _probe(server: launcher.RunningServer, target: str, content_type: str, deadline: float, longest: float) -> int | None:
    """One call, waiting at most ``longest`` seconds and never past ``deadline``; raises if the server died."""
    _check_alive(server)
    wait = max(1.0, min(longest, deadline - time.monotonic()))
    return launcher.probe_aws_json(server.spec.port, target, content_type, timeout=wait)


def _check_alive(server: launcher.RunningServer) -> None:
    code = server.process.poll()
    if code is not None:
        raise server.failure(f"exited with code {code} before its services answered")


def _check_time(server: launcher.RunningServer, deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise server.failure(f"not ready: {what} by the startup deadline")


def _engine_late(status: int | None, log_path: Path) -> str:
    answer = "no answer" if status is None else f"HTTP {status}"
    return (f"its Kinesis engine (kinesis-mock, which LocalStack starts on the first Kinesis call) did not answer "
            f"ListStreams 200 (last: {answer}; the engine's own output is in {log_path})")
