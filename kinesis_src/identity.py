"""A stream's identity: its ARN plus its creation time.

A stream name is not an identity: a stream deleted and created again under
the same name has new shards whose ids (``shardId-000000000000``...) repeat
the old ones, so a checkpoint or a lease table made for the old stream
would shadow the new shards and hand Kinesis sequence numbers it never
issued (an unexplained InvalidArgumentException). Offsets and lease tables
therefore record the identity they were made for, and every restart
compares it with the stream as it is now.
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
    """Raise :class:`StreamRecreatedError` unless ``current`` is the stream ``recorded`` was made for.

    ``where`` names what holds the old identity (a checkpoint, a lease
    table); ``fresh_start`` says how to start over for that engine.
    Creation times are compared to the second: Kinesis reports them with
    millisecond precision, JSON round trips keep microseconds.
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
