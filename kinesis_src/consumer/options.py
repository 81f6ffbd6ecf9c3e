"""What a consumer is told at construction and has to check: streams, initial position, key range, worker id."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import datetime

from lineage import KeyRange

from ..errors import ConfigurationError, InvalidPositionError
from ..names import validate_name
from ..positions import Position, PositionForm, PositionKind


def parse_streams(value: str | Sequence[str]) -> tuple[str, ...]:
    """One stream name, or a non-empty list of distinct ones (each read with its own leases)."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or isinstance(names, (bytes, bytearray)):
        raise ConfigurationError(
            f"stream_name must be a stream name or a list of them, got {type(value).__name__}"
        )
    streams = tuple(validate_name(name, "stream_name") for name in names)
    if not streams:
        raise ConfigurationError("stream_name is an empty list: name at least one stream")
    repeated = sorted({name for name in streams if streams.count(name) > 1})
    if repeated:
        raise ConfigurationError(
            f"stream_name lists {', '.join(map(repr, repeated))} more than once: name each stream once"
        )
    return streams


def parse_key_range(value: KeyRange | str | None) -> KeyRange | None:
    """``key_range``: a :class:`KeyRange`, its text (``"START-END"`` or ``"i/n"``), or None (every key)."""
    if value is None or isinstance(value, KeyRange):
        return value
    if isinstance(value, str):
        return KeyRange.parse(value, "key_range")  # KeyRangeError names the option and the forms
    raise ConfigurationError(
        f"key_range must be a kinesis_src.KeyRange (e.g. KeyRange.slice(0, 4)), 'START-END' or 'i/n', "
        f"got {type(value).__name__}"
    )


_INITIAL_FORMS = frozenset(
    {PositionForm.KEYWORD, PositionForm.TIMESTAMP, PositionForm.DATETIME, PositionForm.POSITION}
)


def parse_initial_position(value: str | datetime | Position) -> Position:
    """``"trim_horizon"``/``"earliest"``, ``"latest"``, a datetime / ISO-8601 text (AT_TIMESTAMP), or a Position."""
    if not isinstance(value, (str, datetime, Position)):
        raise ConfigurationError(f"initial_position must be a string, datetime or Position, got {type(value).__name__}")
    try:
        position = Position.parse(value, forms=_INITIAL_FORMS)
    except InvalidPositionError as exc:
        if not isinstance(value, str):
            raise
        raise ConfigurationError(
            f"initial_position {value!r} is not valid: use 'trim_horizon', 'latest', or an ISO-8601 "
            "timestamp / datetime (AT_TIMESTAMP)"
        ) from exc
    if position.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER):
        raise ConfigurationError("initial_position is where a new application starts: trim_horizon, latest or a timestamp")
    return position


def default_worker_id() -> str:
    """Unique per process, readable in the lease table: host, pid, and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
