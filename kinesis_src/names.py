"""Names that become parts of DynamoDB keys: applications, streams, runs, tables, workers.

One parser per concept, so a bad name fails with the same message wherever it enters.
"""

from __future__ import annotations

import re

from .errors import ConfigurationError

MAX_NAME_LENGTH = 128  # stream, application and stream consumer names
_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_NAME_LENGTH}}}")
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")


def validate_name(value: str, option: str) -> str:
    """Application, stream and run names: the characters Kinesis allows in stream names."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigurationError(
            f"{option} {value!r} is not valid: use 1-128 characters from A-Z a-z 0-9 _ . - "
            "(it is part of the lease table's keys)"
        )
    return value


def validate_consumer_name(value: str, option: str = "consumerName") -> str:
    """An enhanced fan-out consumer's name: what RegisterStreamConsumer accepts."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigurationError(
            f"{option} {value!r} is not a valid stream consumer name: use 1-128 characters from "
            "A-Z a-z 0-9 _ . - (names are per stream; the default is the application name)"
        )
    return value


def validate_table_name(value: str, option: str = "leaseTableName") -> str:
    if not isinstance(value, str) or not _TABLE_NAME.fullmatch(value):
        raise ConfigurationError(
            f"{option} {value!r} is not a DynamoDB table name: use 3-255 characters from "
            "A-Z a-z 0-9 _ . -"
        )
    return value


def validate_worker_id(value: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 256 or not value.isprintable():
        raise ConfigurationError(f"worker id {value!r} must be 1-256 printable characters")
    return value


def default_table_name(application: str) -> str:
    """``leaseTableName`` when the user gives none: derived from ``applicationName``."""
    return f"kinesis-src-{validate_name(application, 'applicationName')}"

