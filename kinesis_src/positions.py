"""Where a read starts in a shard: the five iterator types, as one value with a stable JSON form.

Readers, Spark offsets and checkpoints store it; :meth:`Position.parse` reads users' positions.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from .errors import InvalidPositionError

_MAX_SEQUENCE_DIGITS = 128  # Kinesis sequence numbers are decimal strings of up to 128 digits


class PositionKind(str, enum.Enum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
    AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"


class PositionForm(enum.Enum):
    """A way of spelling a start position; each entry point accepts some of them (value: how errors list it)."""

    KEYWORD = "latest, trim_horizon, earliest"
    AT_TIMESTAMP = "at_timestamp"  # the keyword, its timestamp given apart (Spark's startingTimestamp)
    AT_TIMESTAMP_PHRASE = "AT_TIMESTAMP <ISO-8601>"  # one string: the awslabs connector's startingPosition
    TIMESTAMP = "an ISO-8601 timestamp or epoch seconds"
    DATETIME = "a datetime"
    POSITION = "a Position"


KEYWORD_FORMS = frozenset({PositionForm.KEYWORD, PositionForm.AT_TIMESTAMP})
_KEYWORDS = {
    "latest": PositionKind.LATEST,
    "trim_horizon": PositionKind.TRIM_HORIZON,
    "earliest": PositionKind.TRIM_HORIZON,
    "at_timestamp": PositionKind.AT_TIMESTAMP,
}
START_KEYWORDS = tuple(_KEYWORDS)


@dataclass(frozen=True)
class Position:
    """A start position in one shard.

    ``sequence_number`` is set for the two sequence kinds, ``timestamp`` (UTC, aware) for
    AT_TIMESTAMP. ``sub_sequence_number`` (AFTER_SEQUENCE_NUMBER only): after user record N of
    that KPL aggregate; the read starts AT the record and drops up to N, as the KCL does.
    """

    kind: PositionKind
    sequence_number: str | None = None
    timestamp: datetime | None = None
    sub_sequence_number: int | None = None

    def __post_init__(self) -> None:
        needs_seq = self.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER)
        if needs_seq != (self.sequence_number is not None):
            raise InvalidPositionError(
                f"{self.kind.value} position {'needs' if needs_seq else 'takes no'} sequence number"
                f" (got {self.sequence_number!r})"
            )
        if needs_seq:
            validate_sequence_number(self.sequence_number)  # type: ignore[arg-type]
        is_ts = self.kind is PositionKind.AT_TIMESTAMP
        if is_ts != (self.timestamp is not None):
            raise InvalidPositionError(
                f"{self.kind.value} position {'needs' if is_ts else 'takes no'} timestamp"
                f" (got {self.timestamp!r})"
            )
        if self.sub_sequence_number is not None and (
            self.kind is not PositionKind.AFTER_SEQUENCE_NUMBER or self.sub_sequence_number < 0
        ):
            raise InvalidPositionError(
                f"sub-sequence number {self.sub_sequence_number!r} needs an AFTER_SEQUENCE_NUMBER position "
                "and must be >= 0"
            )
        if is_ts and self.timestamp.tzinfo is None:  # type: ignore[union-attr]
            raise InvalidPositionError(
                f"AT_TIMESTAMP position needs a timezone-aware timestamp, got {self.timestamp!r}"
            )

    # -- constructors ------------------------------------------------------------

    @classmethod
    def trim_horizon(cls) -> Position:
        return cls(PositionKind.TRIM_HORIZON)

    @classmethod
    def latest(cls) -> Position:
        return cls(PositionKind.LATEST)

    @classmethod
    def at_timestamp(cls, when: datetime | str | float) -> Position:
        return cls(PositionKind.AT_TIMESTAMP, timestamp=parse_timestamp(when))

    @classmethod
    def at_sequence(cls, sequence_number: str) -> Position:
        return cls(PositionKind.AT_SEQUENCE_NUMBER, sequence_number=sequence_number)

    @classmethod
    def after_sequence(cls, sequence_number: str, sub_sequence_number: int | None = None) -> Position:
        """After the record ``sequence_number``, or after its user record ``sub_sequence_number``."""
        return cls(
            PositionKind.AFTER_SEQUENCE_NUMBER,
            sequence_number=sequence_number,
            sub_sequence_number=sub_sequence_number,
        )

    @property
    def inside_record(self) -> bool:
        """True for "after user record N of an aggregate": the read starts AT the record and skips."""
        return self.sub_sequence_number is not None

    @classmethod
    def parse(
        cls,
        value: str | datetime | Position,
        timestamp: datetime | str | float | None = None,
        *,
        forms: frozenset[PositionForm] = KEYWORD_FORMS,
    ) -> Position:
        """The one reader of a user-given start position, in the spellings ``forms`` allows.

        Keywords ignore case and blanks; ``earliest`` is ``trim_horizon``. Anything else raises
        InvalidPositionError listing what is accepted.
        """
        if isinstance(value, Position) and PositionForm.POSITION in forms:
            return value
        if isinstance(value, datetime) and PositionForm.DATETIME in forms:
            return cls.at_timestamp(value)
        found = _parse_text(value, timestamp, forms) if isinstance(value, str) else None
        if found is None:
            accepted = ", ".join(form.value for form in PositionForm if form in forms)
            raise InvalidPositionError(f"unknown initial position {value!r}: expected one of {accepted}")
        return found

    # -- use ---------------------------------------------------------------------

    def iterator_args(self) -> dict[str, Any]:
        """Keyword arguments for GetShardIterator."""
        kind = PositionKind.AT_SEQUENCE_NUMBER if self.inside_record else self.kind
        args: dict[str, Any] = {"ShardIteratorType": kind.value}
        if self.sequence_number is not None:
            args["StartingSequenceNumber"] = self.sequence_number
        if self.timestamp is not None:
            args["Timestamp"] = self.timestamp
        return args

    def to_dict(self) -> dict[str, Any]:
        """Stable, JSON-ready form: fixed keys, so equal positions serialize equally."""
        out = {"kind": self.kind.value}
        if self.sequence_number is not None:
            out["sequenceNumber"] = self.sequence_number
        if self.sub_sequence_number is not None:
            out["subSequenceNumber"] = self.sub_sequence_number  # type: ignore[assignment]
        if self.timestamp is not None:
            out["timestamp"] = format_timestamp(self.timestamp)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Position:
        try:
            kind = PositionKind(data["kind"])
        except (KeyError, ValueError, TypeError) as exc:
            raise InvalidPositionError(
                f"position {dict(data)!r} has no valid 'kind' (one of "
                f"{', '.join(k.value for k in PositionKind)})"
            ) from exc
        ts = data.get("timestamp")
        return cls(
            kind,
            sequence_number=data.get("sequenceNumber"),
            timestamp=parse_timestamp(ts) if ts is not None else None,
            sub_sequence_number=_sub_sequence(data.get("subSequenceNumber")),
        )

    def __str__(self) -> str:
        if self.sub_sequence_number is not None:
            return f"{self.kind.value} {self.sequence_number}/{self.sub_sequence_number}"
        if self.sequence_number is not None:
            return f"{self.kind.value} {self.sequence_number}"
        if self.timestamp is not None:
            return f"{self.kind.value} {format_timestamp(self.timestamp)}"
        return self.kind.value


def keyword_kind(text: str) -> PositionKind | None:
    """The kind a start keyword names (any case, blanks around ignored), or None if it is not one."""
    return _KEYWORDS.get(text.strip().lower())


def _parse_text(text: str, timestamp: datetime | str | float | None, forms: frozenset[PositionForm]) -> Position | None:
    """A keyword, ``AT_TIMESTAMP <timestamp>`` or a timestamp, as far as ``forms`` allows; None if none fits."""
    word, _, rest = text.strip().partition(" ")
    kind, rest = _KEYWORDS.get(word.lower()), rest.strip()
    if kind is PositionKind.AT_TIMESTAMP and rest and PositionForm.AT_TIMESTAMP_PHRASE in forms:
        return Position.at_timestamp(rest)
    if kind is PositionKind.AT_TIMESTAMP and not rest and PositionForm.AT_TIMESTAMP in forms:
        if timestamp is None:
            raise InvalidPositionError(
                "initial position at_timestamp needs a timestamp (option startingTimestamp, "
                "ISO-8601 such as 2026-01-31T12:00:00Z)"
            )
        return Position.at_timestamp(timestamp)
    if kind in (PositionKind.LATEST, PositionKind.TRIM_HORIZON) and not rest and PositionForm.KEYWORD in forms:
        return Position(kind)
    if PositionForm.TIMESTAMP in forms:
        return Position.at_timestamp(text)
    return None


def _sub_sequence(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPositionError(f"sub-sequence number {value!r} is not an integer")
    return value


def validate_sequence_number(value: str) -> str:
    if not isinstance(value, str) or not value.isdigit() or len(value) > _MAX_SEQUENCE_DIGITS:
        raise InvalidPositionError(
            f"sequence number {value!r} is not a Kinesis sequence number (a decimal string of at "
            f"most {_MAX_SEQUENCE_DIGITS} digits)"
        )
    return value


_ACCEPTED_TIMESTAMPS = (
    "ISO-8601 (e.g. 2026-01-31T12:00:00Z or 2026-01-31T12:00:00.250+01:00; no offset means UTC) "
    "or epoch seconds (0 up to 253402300799, i.e. 9999-12-31)"
)


def parse_timestamp(value: datetime | str | float | int) -> datetime:
    """Parse ISO-8601 text, epoch seconds or a datetime into an aware UTC datetime; naive is UTC.

    Anything else, an out-of-range value too, raises InvalidPositionError, never OverflowError.
    """

    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        parsed = _from_epoch(value, value)
    elif isinstance(value, str):
        parsed = _parse_iso(value)
    else:
        raise _invalid_timestamp(value, "is neither text, a number nor a datetime")
    return _as_utc(parsed, value)


def _invalid_timestamp(shown: object, why: str) -> InvalidPositionError:
    return InvalidPositionError(f"timestamp {shown!r} {why}; expected {_ACCEPTED_TIMESTAMPS}")


def _from_epoch(seconds: float, shown: object) -> datetime:
    """Epoch seconds to UTC; huge, negative or non-finite numbers are the user's input error."""
    try:
        in_range = math.isfinite(seconds) and seconds >= 0
        parsed = datetime.fromtimestamp(seconds, timezone.utc) if in_range else None
    except (OverflowError, ValueError, OSError):  # past year 9999, or past the platform's time_t
        parsed = None
    if parsed is None:
        raise _invalid_timestamp(shown, "is out of range as epoch seconds")
    return parsed


def _as_utc(parsed: datetime, shown: object) -> datetime:
    """Naive means UTC; an offset that moves the instant past year 1 or 9999 is out of range."""
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise _invalid_timestamp(shown, "is outside the dates UTC can express (years 1 to 9999)") from None


def _parse_iso(text: str) -> datetime:
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(cleaned)
    except ValueError:
        pass
    try:
        seconds = float(cleaned)
    except ValueError:
        raise _invalid_timestamp(text, "is not ISO-8601 nor epoch seconds") from None
    return _from_epoch(seconds, text)


def format_timestamp(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
