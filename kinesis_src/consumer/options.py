"""What a consumer is told at construction and has to check: the initial position, the worker id."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime

from ..errors import ConfigurationError, KinesisSourceError
from ..positions import Position, PositionKind


def parse_initial_position(value: str | datetime | Position) -> Position:
    """``"trim_horizon"``/``"earliest"``, ``"latest"``, a datetime / ISO-8601 text (AT_TIMESTAMP), or a Position."""
    if isinstance(value, Position):
        position = value
    elif isinstance(value, datetime):
        position = Position.at_timestamp(value)
    elif isinstance(value, str) and value.strip().lower() in ("trim_horizon", "earliest", "latest"):
        position = Position.parse(value)
    elif isinstance(value, str):
        try:
            position = Position.at_timestamp(value)
        except (ValueError, KinesisSourceError) as exc:
            raise ConfigurationError(
                f"initial_position {value!r} is not valid: use 'trim_horizon', 'latest', or an ISO-8601 "
                "timestamp / datetime (AT_TIMESTAMP)"
            ) from exc
    else:
        raise ConfigurationError(f"initial_position must be a string, datetime or Position, got {type(value).__name__}")
    if position.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER):
        raise ConfigurationError("initial_position is where a new application starts: trim_horizon, latest or a timestamp")
    return position


def default_worker_id() -> str:
    """Unique per process, readable in the lease table: host, pid, and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
