"""Names shared by the emulator kit, the library's configuration and the tests.

``ENV_ISOLATED`` lives in namespace.py, which must run as a plain script.
"""

from __future__ import annotations

from .namespace import ENV_ISOLATED

# Endpoint variables understood by kinesis_src.config and the tests.
ENV_KINESIS_ENDPOINT = "KINESIS_SRC_ENDPOINT_URL"
ENV_DYNAMODB_ENDPOINT = "KINESIS_SRC_DYNAMODB_ENDPOINT_URL"
ENV_KINESALITE_ENDPOINT = "KINESIS_SRC_KINESALITE_ENDPOINT_URL"
# Where the npm emulators are installed (default: a per-user cache directory, see install.py).
ENV_EMULATORS_DIR = "KINESIS_SRC_EMULATORS_DIR"
# Opt-in: start the embedded emulators outside a private network namespace (they bind all interfaces).
ENV_ALLOW_UNISOLATED = "KINESIS_SRC_ALLOW_UNISOLATED"

DUMMY_ACCESS_KEY = "test"
DUMMY_SECRET_KEY = "test"
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "000000000000"
LOOPBACK = "127.0.0.1"

__all__ = [
    "DEFAULT_ACCOUNT_ID",
    "DEFAULT_REGION",
    "DUMMY_ACCESS_KEY",
    "DUMMY_SECRET_KEY",
    "ENV_ALLOW_UNISOLATED",
    "ENV_DYNAMODB_ENDPOINT",
    "ENV_EMULATORS_DIR",
    "ENV_ISOLATED",
    "ENV_KINESALITE_ENDPOINT",
    "ENV_KINESIS_ENDPOINT",
    "LOOPBACK",
]
