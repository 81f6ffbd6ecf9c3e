"""AWS KCL 3.1.3 (Java) as a peer worker: the MultiLangDaemon with a Python record processor.

Run with benchmarks/peers/.venv-kclpy-ext's Python: it writes the daemon's
properties and logback config into the delivery-log directory, then
``exec``s the JVM on the jars kclpy-ext bundles (the machine's Java 17, no
Maven), so the worker's PID is the daemon's and a SIGKILL kills it (its
shard processes then see their stdin close). Settings: polling retrieval,
``maxRecords``, ``idleTimeBetweenReadsInMillis`` and ``failoverTimeMillis``
from the shared command line, ``metricsLevel = NONE``, TRIM_HORIZON; the
rest are KCL's defaults. The AWS SDK's CBOR wire format is turned off
(``-Daws.cborEnabled=false``) so KCL speaks the same JSON protocol as every
other peer (the replay endpoint serves only JSON).

Before the daemon starts, the worker creates KCL's lease table itself, as KCL
makes it, with the owner GSI KCL 3 adds later (``LeaseOwnerToLeaseKeyIndex``):
DynamoDB Local sometimes leaves a GSI added to an existing table CREATING
for minutes, and KCL then assigns no lease at all (docs/peers.md). A GSI
made with the table is ACTIVE at once; KCL finds both and goes on.
"""

from __future__ import annotations

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common_args import REGION, announce, parse  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{36}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def properties(args, executable: str) -> str:  # noqa: ANN001
    settings = {
        "executableName": executable,
        "streamName": args.stream,
        "applicationName": args.app,
        "workerId": args.worker,
        "AwsCredentialsProvider": "DefaultCredentialsProvider",
        "processingLanguage": "python/3.11",
        "initialPositionInStream": "TRIM_HORIZON",
        "regionName": REGION,
        "kinesisEndpoint": args.kinesis,
        "dynamoDBEndpoint": args.dynamodb,
        "metricsLevel": "NONE",
        "retrievalMode": "POLLING",
        "maxRecords": str(args.max_records),
        "idleTimeBetweenReadsInMillis": str(args.idle_ms),
        "failoverTimeMillis": str(int(args.failover_s * 1000)),
    }
    return "".join(f"{k} = {v}\n" for k, v in settings.items())


def create_lease_table(args) -> None:  # noqa: ANN001
    """KCL's lease table (``applicationName``) with its owner GSI: tests/kcl_daemon.py's, for this worker's endpoint."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
    from kcl_daemon import create_lease_table as create  # noqa: PLC0415  (a test helper: stdlib only at import)

    create({"AWS_REGION": REGION, "KINESIS_SRC_DYNAMODB_ENDPOINT_URL": args.dynamodb,
            "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
            "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "test")}, args.app)


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    create_lease_table(args)
    import amazon_kclpy

    jars = os.path.join(os.path.dirname(amazon_kclpy.__file__), "jars")
    conf = os.path.join(args.sink, f"kcl-{args.worker}")
    os.makedirs(conf, exist_ok=True)
    wrapper = os.path.join(conf, "processor.sh")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.join(HERE, 'kcl_processor.py')}\n")
    os.chmod(wrapper, 0o755)
    props = os.path.join(conf, "app.properties")
    with open(props, "w") as f:
        f.write(properties(args, wrapper))
    logback = os.path.join(conf, "logback.xml")
    with open(logback, "w") as f:
        f.write(LOGBACK.format(log=os.path.join(conf, "kcl.log")))
    os.environ["PEERS_SINK"] = args.sink
    os.environ["PEERS_WORKER"] = args.worker
    java = shutil.which("java") or "java"
    argv = [java, "-Daws.cborEnabled=false", f"-Dlogback.configurationFile={logback}",
            "-cp", f"{jars}/*:{conf}", "software.amazon.kinesis.multilang.MultiLangDaemon",
            "--properties-file", props]
    announce(args.worker)
    os.execv(java, argv)


if __name__ == "__main__":
    main()
