"""A stream's identity: its ARN plus its creation time.

A recreated stream repeats shard ids, so offsets and lease tables check it (docs/leases.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from .errors import ConfigurationError, StreamRecreatedError
from .positions import format_timestamp, parse_timestamp


@dataclass(frozen=True)
class StreamIdentity:
    arn: str
    created: datetime

    def __post_init__(self) -> None:
        if self.created.tzinfo is None:
            raise ConfigurationError(f"stream creation time {self.created!r} must be timezone-aware")

    @property
    def name(self) -> str:
        """The stream name inside the ARN (``arn:aws:kinesis:<region>:<account>:stream/<name>``)."""
        return self.arn.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, str]:
        return {"arn": self.arn, "created": format_timestamp(self.created.astimezone(timezone.utc))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamIdentity:
        return cls(str(data["arn"]), parse_timestamp(str(data["created"])))

    def describe(self) -> str:
        return f"{self.arn} created {format_timestamp(self.created.astimezone(timezone.utc))}"


def check_same_stream(recorded: StreamIdentity, current: StreamIdentity, where: str, fresh_start: str) -> None:
    """Raise :class:`StreamRecreatedError` unless ``current`` is the stream ``recorded`` is for.

    ``fresh_start`` says how to start over. Creation times compare to the second.
    """

    same_arn = recorded.arn == current.arn
    same_time = abs((recorded.created - current.created).total_seconds()) < 1.0
    if same_arn and same_time:
        return
    if not same_arn and recorded.name != current.name:
        what = f"was made for stream {recorded.name!r}, but the stream is now {current.name!r} (streamName changed)"
    else:
        what = (
            f"was made for {recorded.describe()}, but the stream now is {current.describe()}: it was "
            "deleted and created again, and its shard ids and sequence numbers start over"
        )
    raise StreamRecreatedError(f"{where} {what}. Its positions cannot be used on this stream. {fresh_start}")
