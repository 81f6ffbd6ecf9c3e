"""How calls name a stream: by name, or by ARN (cross-account streams).

A stream given by ARN is called by ARN; keys, offsets and columns use its name either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .errors import ConfigurationError
from .names import validate_name

# arn:<partition>:kinesis:<region>:<12-digit account>:stream/<name>
_ARN = re.compile(r"arn:(aws[a-z-]*):kinesis:([a-z0-9-]+):([0-9]{12}):stream/([A-Za-z0-9_.-]{1,128})")
ARN_EXAMPLE = "arn:aws:kinesis:us-east-1:111122223333:stream/orders"


@dataclass(frozen=True)
class StreamRef:
    """A stream as Kinesis calls name it; with ``arn``, called by ARN (maybe in another account).

    ``repr`` is the quoted label, so ``{stream!r}`` in messages reads like the name it replaces.
    """

    name: str
    arn: str | None = None
    region: str | None = None  # from the ARN
    account: str | None = None  # from the ARN

    @classmethod
    def by_name(cls, name: str, option: str = "streamName") -> StreamRef:
        return cls(validate_name(name, f"option '{option}'"))

    @classmethod
    def parse_arn(cls, text: str, option: str = "streamARN") -> StreamRef:
        """``arn:aws:kinesis:<region>:<account>:stream/<name>``; ConfigurationError naming ``option`` otherwise."""
        match = _ARN.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ConfigurationError(
                f"option '{option}' = {text!r} is not a Kinesis stream ARN: use "
                f"arn:<partition>:kinesis:<region>:<12-digit account>:stream/<name>, e.g. {ARN_EXAMPLE}"
            )
        _, region, account, name = match.groups()
        return cls(name=name, arn=text, region=region, account=account)

    @property
    def label(self) -> str:
        """What messages call the stream: the ARN when given (it says which account), else the name."""
        return self.arn or self.name

    @property
    def target(self) -> str | StreamRef:
        """What to pass as ``stream`` to clients: the name when called by name (every client and fake
        takes names), this ref when called by ARN (:class:`~kinesis_src.aws.KinesisClient` takes both)."""
        return self if self.arn else self.name

    def api_args(self) -> dict[str, str]:
        """The keyword that names this stream in a Kinesis request."""
        return {"StreamARN": self.arn} if self.arn else {"StreamName": self.name}

    def __str__(self) -> str:
        return self.label

    def __repr__(self) -> str:
        return repr(self.label)


def as_ref(stream: str | StreamRef) -> StreamRef:
    """A plain string is a stream name."""

    return stream if isinstance(stream, StreamRef) else StreamRef(stream)


def parse_list(text: str, option: str, parse_one: Callable[[str, str], StreamRef]) -> tuple[StreamRef, ...]:
    """A comma-separated option value: each item parsed by ``parse_one``; empty items and repeats fail."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ConfigurationError(
            f"option '{option}' = {text!r} has an empty item: give one or more values separated by commas, "
            "without a trailing comma"
        )
    refs = tuple(parse_one(item, option) for item in items)
    seen: dict[str, StreamRef] = {}
    for ref in refs:
        if ref.name in seen:
            raise ConfigurationError(
                f"option '{option}' names stream {ref.name!r} twice ({seen[ref.name].label} and {ref.label}); "
                "each stream may appear once (offsets, progress and the stream column key streams by name)"
            )
        seen[ref.name] = ref
    return refs
