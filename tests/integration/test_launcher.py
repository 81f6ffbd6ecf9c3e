"""Tests of localstack/launcher.py (a thin entry point onto kinesis_src.testing.emulators) against the real
emulator servers (no mocks).

Server tests need a private network namespace because kinesis-mock and
DynamoDB Local listen on all interfaces; run them with::

    python localstack/launcher.py isolated -- python -m pytest tests/integration/test_launcher.py -q

Outside that namespace they are skipped.  The "contract" tests pin down the
kinesis-mock behaviour that localstack/README.md documents, so an emulator
upgrade that changes it fails here instead of silently staling the README.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

LOCALSTACK_DIR = Path(__file__).resolve().parents[2] / "localstack"
LAUNCHER = LOCALSTACK_DIR / "launcher.py"
sys.path.insert(0, str(LOCALSTACK_DIR))

import launcher  # found through the sys.path entry above

ISOLATED = os.environ.get(launcher.ENV_ISOLATED) == "1"
LINUX = sys.platform.startswith("linux")

servers = pytest.mark.skipif(
    not ISOLATED,
    reason="starts servers that listen on all interfaces: run under "
    "`python localstack/launcher.py isolated -- pytest`",
)


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _client(service: str, endpoint: str) -> object:
    boto3 = pytest.importorskip("boto3")
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def _wait_active(kinesis: object, stream: str, timeout: float = 30.0) -> float:
    """Poll DescribeStreamSummary until ACTIVE; returns the seconds it took."""
    started = time.monotonic()
    while True:
        summary = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
        if summary["StreamStatus"] == "ACTIVE":
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"{stream} not ACTIVE after {timeout}s"
        time.sleep(0.02)


def _run_launcher(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LAUNCHER), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


# --------------------------------------------------------------------------
# No servers needed
# --------------------------------------------------------------------------


def test_localstack_dir_is_not_a_package() -> None:
    """An __init__.py would shadow the real `localstack` PyPI package."""
    assert not (LOCALSTACK_DIR / "__init__.py").exists()


def test_probe_reports_unreachable_port_as_none() -> None:
    port = launcher.free_port()
    assert launcher.probe_aws_json(port, "Kinesis_20131202.ListStreams", "application/x-amz-json-1.1") is None
    assert not launcher.port_is_open(port)


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux-only")
def test_isolated_sees_only_loopback_and_it_is_up() -> None:
    check = (
        "import os, sys\n"
        "names = sorted(os.listdir('/sys/class/net'))\n"
        "flags = int(open('/sys/class/net/lo/flags').read(), 16)\n"
        "ok = names == ['lo'] and flags & 1 and os.environ.get('KINESIS_SRC_ISOLATED') == '1'\n"
        "print(names, hex(flags), os.environ.get('KINESIS_SRC_ISOLATED'))\n"
        "sys.exit(0 if ok else 3)\n"
    )
    result = _run_launcher("isolated", "--no-install", "--", sys.executable, "-c", check)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux-only")
def test_isolated_returns_the_command_exit_code() -> None:
    result = _run_launcher("isolated", "--no-install", "--", sys.executable, "-c", "raise SystemExit(7)")
    assert result.returncode == 7, result.stderr


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux-only")
def test_the_package_command_line_is_the_same_runner() -> None:
    """``python -m kinesis_src.testing isolated`` (what a pip user has) isolates like launcher.py does."""
    check = "import os, sys; sys.exit(7 if os.listdir('/sys/class/net') == ['lo'] else 3)"
    result = subprocess.run([sys.executable, "-m", "kinesis_src.testing", "isolated", "--no-install", "--",
                             sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False,
                            cwd="/")
    assert result.returncode == 7, result.stdout + result.stderr


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux-only")
def test_isolated_has_no_route_off_the_machine() -> None:
    check = (
        "import socket, sys\n"
        "s = socket.socket(); s.settimeout(2)\n"
        "try:\n"
        "    s.connect(('192.0.2.1', 80))\n"  # TEST-NET-1: must be unreachable, not merely slow
        "except OSError as exc:\n"
        "    sys.exit(0 if 'unreachable' in str(exc).lower() else 4)\n"
        "sys.exit(5)\n"
    )
    result = _run_launcher("isolated", "--no-install", "--", sys.executable, "-c", check)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux-only")
def test_isolated_commands_find_the_java_and_node_the_toolchain_chose() -> None:
    """PySpark and npm inside the namespace run on toolchain.py's choice (the wheels where the machine's are unfit)."""
    java, node = launcher.toolchain.java(), launcher.toolchain.node()
    result = _run_launcher("isolated", "--no-install", "--", "sh", "-c",
                           'command -v node; if [ -n "$JAVA_HOME" ]; then echo "$JAVA_HOME/bin/java"; '
                           "else command -v java; fi")
    assert result.returncode == 0, result.stderr
    expected_java = java.path if java.source == "PATH" and not os.environ.get("JAVA_HOME") else java.home / "bin" / "java"
    assert result.stdout.split() == [str(node.path), str(expected_java)]


# --------------------------------------------------------------------------
# Lifecycle against real servers
# --------------------------------------------------------------------------


@pytest.mark.integration
@servers
def test_ensure_installed_is_a_noop_when_current() -> None:
    started = time.monotonic()
    node_modules = launcher.ensure_installed(quiet=True)
    assert (node_modules / "kinesis-local" / "main.js").is_file()
    assert launcher.find_dynamodb_dir(node_modules).name.startswith("dynamodb_local_")
    assert time.monotonic() - started < 5.0  # stamp matched: npm was not run


@pytest.mark.integration
@servers
def test_the_emulators_run_on_the_chosen_node_and_java() -> None:
    with launcher.Emulators(kinesis=True, dynamodb=True) as emulators:
        running = {name: Path(f"/proc/{pid}/exe").resolve() for name, pid in emulators.pids.items()}
    assert running == {"kinesis-mock": launcher.toolchain.node().path.resolve(),
                       "dynamodb-local": launcher.toolchain.java().path.resolve()}


@pytest.mark.integration
@servers
def test_kinesis_and_dynamodb_work_and_are_cleaned_up() -> None:
    stream, table = f"s-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    with launcher.Emulators(kinesis=True, dynamodb=True) as emulators:
        pids, ports = emulators.pids, emulators.ports
        kinesis = _client("kinesis", emulators.kinesis_endpoint)
        dynamodb = _client("dynamodb", emulators.dynamodb_endpoint)

        kinesis.create_stream(StreamName=stream, ShardCount=2)
        _wait_active(kinesis, stream)
        put = kinesis.put_record(StreamName=stream, Data=b"\x00hello\xff", PartitionKey="k")
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=put["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = kinesis.get_records(ShardIterator=iterator)["Records"]
        assert [r["Data"] for r in records] == [b"\x00hello\xff"]

        dynamodb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName=table, Item={"k": {"S": "lease"}, "owner": {"S": "w1"}})
        item = dynamodb.get_item(TableName=table, Key={"k": {"S": "lease"}}, ConsistentRead=True)["Item"]
        assert item["owner"] == {"S": "w1"}

        env = emulators.env()
        assert env[launcher.ENV_KINESIS_ENDPOINT] == emulators.kinesis_endpoint
        assert env[launcher.ENV_DYNAMODB_ENDPOINT] == emulators.dynamodb_endpoint
        assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "test"
        assert env["AWS_DEFAULT_REGION"] == env["AWS_REGION"] == "us-east-1"
        assert emulators.kinesis_endpoint in emulators.describe()
        assert all(seconds > 0 for seconds in emulators.startup_seconds.values())
        log_dir = emulators.log_dir

    assert all(_pid_gone(pid) for pid in pids.values()), pids
    assert not any(launcher.port_is_open(port) for port in ports.values()), ports
    assert log_dir is not None and not log_dir.exists()  # temp logs removed after a clean run


@pytest.mark.integration
@servers
def test_failed_start_raises_with_command_and_log_tail(tmp_path: Path) -> None:
    missing_jar = tmp_path / "nope" / "DynamoDBLocal.jar"
    with pytest.raises(launcher.ServerStartError) as raised:
        launcher.Emulators(kinesis=False, dynamodb=True, dynamodb_jar=missing_jar, startup_timeout=30,
                           log_dir=tmp_path).start()
    message = str(raised.value)
    assert "dynamodb-local exited with code" in message
    assert str(missing_jar) in message  # the command line
    assert "Unable to access jarfile" in message  # java's own words, from the log tail
    assert (tmp_path / "dynamodb-local.log").is_file()  # kept for the post-mortem


@pytest.mark.integration
@servers
def test_port_already_in_use_is_reported_before_launch() -> None:
    with launcher.Emulators(kinesis=True, dynamodb=False) as running:
        taken = running.ports["kinesis-mock"]
        with pytest.raises(launcher.ServerStartError, match=f"port {taken} is already in use"):
            launcher.Emulators(kinesis=True, dynamodb=False, kinesis_port=taken).start()


@pytest.mark.integration
@servers
def test_atexit_safety_net_stops_forgotten_servers() -> None:
    """A process that starts servers and exits without stopping them must not leak them.

    Runs in a child process: calling the atexit hook here would also stop the
    session-wide emulators other test modules share.
    """
    forgetful = (
        "import sys; sys.path.insert(0, sys.argv[1]); import launcher\n"
        "emulators = launcher.Emulators(kinesis=True, dynamodb=False).start()\n"
        "print(emulators.pids['kinesis-mock'], emulators.ports['kinesis-mock'])\n"
    )
    result = subprocess.run([sys.executable, "-c", forgetful, str(LOCALSTACK_DIR)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    pid, port = (int(word) for word in result.stdout.split())
    assert _pid_gone(pid)
    assert not launcher.port_is_open(port)


@pytest.mark.integration
@servers
def test_kinesalite_binds_loopback_only() -> None:
    with launcher.Emulators(kinesis=False, dynamodb=False, kinesalite=True) as emulators:
        port = emulators.ports["kinesalite"]
        listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
        local = {line.split()[1] for line in listening if line.split()[3] == "0A"}  # 0A = LISTEN
        assert f"0100007F:{port:04X}" in local, local  # 127.0.0.1, not 0.0.0.0
        assert launcher.ENV_KINESALITE_ENDPOINT in emulators.env()


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


@pytest.mark.integration
@servers
def test_cli_run_passes_env_and_exit_code() -> None:
    check = (
        "import os, sys, urllib.parse\n"
        "url = os.environ['KINESIS_SRC_ENDPOINT_URL']\n"
        "sys.path.insert(0, os.environ['LAUNCHER_DIR']); import launcher\n"
        "port = urllib.parse.urlsplit(url).port\n"
        "status = launcher.probe_aws_json(port, 'Kinesis_20131202.ListStreams', 'application/x-amz-json-1.1')\n"
        "sys.exit(42 if status == 200 and 'KINESIS_SRC_DYNAMODB_ENDPOINT_URL' not in os.environ else 1)\n"
    )
    result = subprocess.run(
        [sys.executable, str(LAUNCHER), "run", "--no-dynamodb", "--", sys.executable, "-c", check],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "LAUNCHER_DIR": str(LOCALSTACK_DIR)},
    )
    assert result.returncode == 42, result.stderr


@pytest.mark.integration
@servers
def test_cli_start_prints_exports_and_stops_on_sigterm() -> None:
    process = subprocess.Popen([sys.executable, str(LAUNCHER), "start", "--no-dynamodb"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        exports: dict[str, str] = {}
        assert process.stdout is not None
        for line in process.stdout:  # blocks until the launcher prints (after readiness)
            key, _, value = line.removeprefix("export ").strip().partition("=")
            exports[key] = value
            if key == "AWS_REGION":
                break
        port = int(exports["KINESIS_SRC_ENDPOINT_URL"].rsplit(":", 1)[1])
        assert launcher.port_is_open(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert not launcher.port_is_open(port)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# --------------------------------------------------------------------------
# kinesis-mock contract (what localstack/README.md "Emulator notes" promises)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kinesis() -> Iterator[object]:
    if not ISOLATED:
        pytest.skip("run under `python localstack/launcher.py isolated -- pytest`")
    with launcher.Emulators(kinesis=True, dynamodb=False) as emulators:
        yield _client("kinesis", emulators.kinesis_endpoint)


def _split_once(kinesis: object) -> tuple[str, list[str]]:
    """A 1-shard stream with 3 records, split in two: returns (stream, child ids)."""
    stream = f"split-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    _wait_active(kinesis, stream)
    for i in range(3):
        kinesis.put_record(StreamName=stream, Data=str(i).encode(), PartitionKey=str(i))
    kinesis.split_shard(StreamName=stream, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**127))
    assert _wait_active(kinesis, stream) < 5.0
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    children = [s["ShardId"] for s in shards if s.get("ParentShardId") == "shardId-000000000000"]
    return stream, children


@pytest.mark.integration
def test_contract_drained_parent_returns_child_shards_and_no_iterator(kinesis: object) -> None:
    stream, children = _split_once(kinesis)
    assert len(children) == 2
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen: list[bytes] = []
    for _ in range(10):
        response = kinesis.get_records(ShardIterator=iterator, Limit=2)
        seen += [r["Data"] for r in response["Records"]]
        if "NextShardIterator" not in response:
            break
        iterator = response["NextShardIterator"]
    assert seen == [b"0", b"1", b"2"]
    assert sorted(c["ShardId"] for c in response["ChildShards"]) == sorted(children)
    assert all(c["ParentShards"] == ["shardId-000000000000"] for c in response["ChildShards"])


@pytest.mark.integration
def test_contract_list_shards_filters(kinesis: object) -> None:
    stream, children = _split_once(kinesis)
    def ids(**kwargs: object) -> list[str]:
        return [s["ShardId"] for s in kinesis.list_shards(StreamName=stream, **kwargs)["Shards"]]
    assert ids(ShardFilter={"Type": "AT_LATEST"}) == children
    assert ids(ShardFilter={"Type": "AT_TRIM_HORIZON"}) == ["shardId-000000000000", *children]
    assert ids(ShardFilter={"Type": "AFTER_SHARD_ID", "ShardId": children[0]}) == children[1:]
    assert ids(ExclusiveStartShardId="shardId-000000000000") == children
    closed = kinesis.list_shards(StreamName=stream)["Shards"][0]["SequenceNumberRange"]
    assert closed["EndingSequenceNumber"] == "9223372036854775807"  # not a real sequence number


@pytest.mark.integration
def test_contract_next_token_pages_ignore_the_shard_filter(kinesis: object) -> None:
    """Known kinesis-mock quirk: pages after the first are not filtered (closed shards leak in)."""
    stream = f"page-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=3)
    _wait_active(kinesis, stream)
    kinesis.split_shard(StreamName=stream, ShardToSplit="shardId-000000000001",
                        NewStartingHashKey=str(2**128 // 2))
    _wait_active(kinesis, stream)
    page = kinesis.list_shards(StreamName=stream, ShardFilter={"Type": "AT_LATEST"}, MaxResults=1)
    paged = [s["ShardId"] for s in page["Shards"]]
    while page.get("NextToken"):
        page = kinesis.list_shards(NextToken=page["NextToken"], MaxResults=1)
        paged += [s["ShardId"] for s in page["Shards"]]
    assert "shardId-000000000001" in paged  # closed, yet returned under AT_LATEST paging


@pytest.mark.integration
def test_contract_list_shards_pages_hold_at_most_100(kinesis: object) -> None:
    """kinesis-mock ignores MaxResults above 100 (AWS allows 1,000): callers must follow NextToken."""
    stream = f"wide-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=101)
    _wait_active(kinesis, stream)
    page = kinesis.list_shards(StreamName=stream, MaxResults=1000)
    assert len(page["Shards"]) == 100 and page.get("NextToken")
    kinesis.delete_stream(StreamName=stream)  # free the shard quota for the other tests
