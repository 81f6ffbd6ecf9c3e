"""GetRecords bodies and SubscribeToShard events decoded in one C pass (msgspec), for every reader.

The documented shape, strictly: any other body raises MalformedResponseError naming the field,
never its value (docs/performance.md, "Decoding GetRecords bodies")."""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Union

import msgspec

from ..errors import KinesisSourceError, MalformedResponseError
from ..records import ChildShard, RecordPage

FROM_PARSER = "from_parser"
"""Attribute set on errors raised inside botocore's parse step: the boundary names the call on them."""


def from_parser(error: KinesisSourceError) -> KinesisSourceError:
    """Mark ``error`` as raised by the parser, which cannot know the call's resource or endpoint."""
    setattr(error, FROM_PARSER, True)
    return error


class _Record(msgspec.Struct, rename="pascal", gc=False):
    sequence_number: str
    data: bytes
    partition_key: Union[str, None] = None
    approximate_arrival_timestamp: Union[float, None] = None
    encryption_type: Union[str, None] = None


class _HashKeyRange(msgspec.Struct, rename="pascal", gc=False):
    starting_hash_key: Union[str, int]
    ending_hash_key: Union[str, int]


class _ChildShard(msgspec.Struct, rename="pascal", gc=False):
    shard_id: str
    hash_key_range: _HashKeyRange
    parent_shards: Union[list[str], None] = None


class _GetRecords(msgspec.Struct, rename="pascal", gc=False):
    records: Union[list[_Record], None] = None
    next_shard_iterator: Union[str, None] = None
    millis_behind_latest: Union[int, None] = None
    child_shards: Union[list[_ChildShard], None] = None


class _Event(msgspec.Struct, rename="pascal", gc=False):
    records: Union[list[_Record], None] = None
    continuation_sequence_number: Union[str, None] = None
    millis_behind_latest: Union[int, None] = None
    child_shards: Union[list[_ChildShard], None] = None


_GET_RECORDS = msgspec.json.Decoder(_GetRecords)
_EVENT = msgspec.json.Decoder(_Event)
_ANY = msgspec.json.Decoder(dict[str, Any])
_SEQUENCE_NUMBER = attrgetter("sequence_number")
_DATA = attrgetter("data")
_PARTITION_KEY = attrgetter("partition_key")
_ARRIVAL = attrgetter("approximate_arrival_timestamp")
_ENCRYPTION = attrgetter("encryption_type")


def decode_get_records(body: bytes | str, what: str = "GetRecords response body") -> RecordPage:
    """A GetRecords body as a columnar page; :class:`MalformedResponseError` unless of the documented shape."""
    doc = _decoded(_GET_RECORDS, body, what)
    return _page(doc, doc.next_shard_iterator, what, len(body))


def decode_subscribe_event(payload: bytes | str, what: str = "SubscribeToShard event") -> RecordPage:
    """A SubscribeToShardEvent payload as a page: GetRecords' fields, with the continuation as
    ``next_iterator`` (None on a closed shard's last event)."""
    doc = _decoded(_EVENT, payload, what)
    return _page(doc, doc.continuation_sequence_number, what, len(payload))


def decode_json_object(body: bytes | str, what: str) -> dict[str, Any]:
    """Any other JSON answer as a dict; :class:`MalformedResponseError` unless a JSON object."""
    decoded: dict[str, Any] = _decoded(_ANY, body, what)
    return decoded


def _decoded(decoder: msgspec.json.Decoder[Any], body: bytes | str, what: str) -> Any:
    """``decoder``'s result; errors raised outside the ``except``, chaining nothing of the body. A
    non-ASCII body is checked whole as UTF-8 first: msgspec checks only the strings it reads."""
    try:
        if isinstance(body, bytes) and not body.isascii():
            body.decode("utf-8")
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        problem = _validation_problem(str(exc))
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        problem = _syntax_problem(exc)
    raise _malformed(what, len(body), problem)


def _malformed(what: str, size: int, problem: str) -> KinesisSourceError:
    return from_parser(
        MalformedResponseError(
            f"{what} ({size} bytes) does not have the documented shape: {problem} (contents are not shown)"
        )
    )


def _validation_problem(message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.Records[0].Data`" as "'Records[0].Data' expected
    ..."; msgspec names types, fields and indices only, never a value."""
    reason, _, at = message.partition(" - at `")
    path = at.rstrip("`").removeprefix("$").removeprefix(".")
    missing = reason.removeprefix("Object missing required field `")
    if missing != reason:
        field = missing.rstrip("`")
        return f"'{path + '.' if path else ''}{field}' is missing"
    where = f"'{path}'" if path else "top level"
    return f"{where} {reason[:1].lower()}{reason[1:]}"


def _syntax_problem(exc: Exception) -> str:
    """Position and reason only: a UnicodeDecodeError holds the body in ``object``."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not JSON (invalid {exc.encoding} at byte {exc.start})"
    return f"not JSON ({str(exc).removeprefix('JSON is malformed: ')})"


def _page(doc: _GetRecords | _Event, next_iterator: str | None, what: str, size: int) -> RecordPage:
    """The columns of the decoded records, pulled with ``map`` over C getters: no Python frame per record."""
    records = doc.records or ()
    return RecordPage(
        partition_keys=list(map(_PARTITION_KEY, records)),
        data=list(map(_DATA, records)),
        sequence_numbers=list(map(_SEQUENCE_NUMBER, records)),
        arrival_epoch=list(map(_ARRIVAL, records)),
        encryption_types=list(map(_ENCRYPTION, records)),
        next_iterator=next_iterator,
        millis_behind_latest=doc.millis_behind_latest,
        child_shards=tuple(_child(i, c, what, size) for i, c in enumerate(doc.child_shards or ())),
    )


def _child(index: int, raw: _ChildShard, what: str, size: int) -> ChildShard:
    hash_range = raw.hash_key_range
    return ChildShard(
        shard_id=raw.shard_id,
        parent_shards=tuple(raw.parent_shards or ()),
        starting_hash_key=_hash_key(hash_range.starting_hash_key, f"ChildShards[{index}].HashKeyRange.StartingHashKey",
                                    what, size),
        ending_hash_key=_hash_key(hash_range.ending_hash_key, f"ChildShards[{index}].HashKeyRange.EndingHashKey",
                                  what, size),
    )


def _hash_key(value: str | int, field: str, what: str, size: int) -> int:
    """A hash key written as a decimal string (or a JSON integer); anything else names the field."""
    if isinstance(value, int):
        return value
    if not (value.isascii() and value.isdigit()):
        raise _malformed(what, size, f"'{field}' is not a decimal integer")
    return int(value)
