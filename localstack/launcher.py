#!/usr/bin/env python3
"""Start local AWS emulators (Kinesis + DynamoDB) for kinesis-src tests: a checkout's entry point.

The working parts live in the package, :mod:`kinesis_src.testing.emulators`
(so a ``pip install kinesis-src`` user has them too, as
``python -m kinesis_src.testing ...``). This file keeps the checkout's
commands and names working, usable both as a module (``import launcher``
with this directory on ``sys.path``) and as a script::

    python localstack/launcher.py install
    python localstack/launcher.py start [--kinesis-port N] [--dynamodb-port N] [--kinesalite]
    python localstack/launcher.py run -- pytest -m integration
    python localstack/launcher.py isolated -- pytest tests/integration

In a checkout the emulators install into ``localstack/node_modules`` (its
``package.json`` / ``package-lock.json`` link to the package's pins).

This directory deliberately has no ``__init__.py``: it must never shadow the
real ``localstack`` package from PyPI.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if importlib.util.find_spec("kinesis_src") is None:  # a Python without the package: use this checkout's
    sys.path.insert(0, str(HERE.parent))

from kinesis_src.testing.emulators import cli, namespace, toolchain  # noqa: E402
from kinesis_src.testing.emulators.cli import build_parser, cmd_run, cmd_start, isolate  # noqa: E402, F401
from kinesis_src.testing.emulators.errors import (  # noqa: E402, F401
    InstallError,
    LauncherError,
    ServerStartError,
    ToolMissingError,
)
from kinesis_src.testing.emulators.group import Emulators, endpoints_for_demo  # noqa: E402, F401
from kinesis_src.testing.emulators.install import (  # noqa: E402, F401
    INSTALL_HINTS,
    STAMP_NAME,
    ensure_installed,
    npm_command,
    require_tool,
)
from kinesis_src.testing.emulators.install import tail as _tail  # noqa: E402, F401
from kinesis_src.testing.emulators.names import (  # noqa: E402, F401
    DEFAULT_ACCOUNT_ID,
    DEFAULT_REGION,
    DUMMY_ACCESS_KEY,
    DUMMY_SECRET_KEY,
    ENV_DYNAMODB_ENDPOINT,
    ENV_ISOLATED,
    ENV_KINESALITE_ENDPOINT,
    ENV_KINESIS_ENDPOINT,
    LOOPBACK,
)
from kinesis_src.testing.emulators.servers import (  # noqa: E402, F401
    RunningServer,
    ServerSpec,
    ensure_port_free,
    free_port,
    launch,
    port_is_open,
    probe_aws_json,
    read_log_tail,
    stop_process_group,
    wait_until_ready,
)
from kinesis_src.testing.emulators.specs import (  # noqa: E402, F401
    KINESALITE_DEFAULTS,
    KINESIS_MOCK_DEFAULTS,
    dynamodb_spec,
    find_dynamodb_dir,
    kinesalite_spec,
    kinesis_mock_spec,
)

NODE_MODULES = HERE / "node_modules"
_run_forwarding = namespace.run_forwarding


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, prog="launcher.py")


if __name__ == "__main__":
    sys.exit(main())
