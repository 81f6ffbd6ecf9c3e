"""GetRecords bodies as services write them, cut into Arrow columns without a JSON parser.

A JSON parser (``json.loads`` or ``pyarrow.json``) costs ~1.2-1.4 µs a record
of 200 B here, the largest part of a Spark task's CPU per record
(docs/performance.md). But a service writes every record of a page the same
way: compact JSON, the same fields in the same order (which order depends on
the service: :mod:`.record_layout` reads it off the first record), e.g.

    {"SequenceNumber":"…","ApproximateArrivalTimestamp":1.7E9,"Data":"…","PartitionKey":"…"}

and nothing escaped (sequence numbers are digits, Data is base64). For such
a body every byte is known but the values, and the values are found from
the positions of the body's double quotes (one numpy pass):

- the body holds no backslash (so every ``"`` delimits a string) and no
  control character; it is UTF-8 (checked whole when not ASCII);
- ``"Records":[`` opens the records and the last ``}]`` closes them; the
  fields around them (the next iterator, ``MillisBehindLatest``) are parsed
  with ``json.loads``, and must not repeat a key, hold another ``Records``
  or ``ChildShards`` (those pages take the reference decoder);
- every record has the first record's quotes, the values' spans are read
  off their positions, and **every byte between the values** is checked
  against the layout (:func:`_check_skeleton`). So a page with any record
  of another shape (a field missing, added, reordered, whitespace) is
  refused whole;
- timestamps must be JSON numbers (a regular expression over the column)
  and finite; Data must be canonical base64 (:mod:`.vector_base64`).

Whatever does not match raises :class:`NotThisLayout` (or ``ValueError``)
and the caller tries the next decoder (``pyarrow.json``, then the
reference), so the page or the error is the reference's in every case
(tests/unit/test_arrow_decode.py runs the decoders on random pages of every
field order and on mutated ones).

Two readers take the cut: Spark tasks (:mod:`.arrow_decode`, which tries
``pyarrow.json`` next) and every other GetRecords page, the Consumer's among
them (:func:`.decode.decode_page`, :func:`cut_page`, which goes straight to
the reference). numpy is only in the ``spark`` extra: without it
:func:`.decode.decode_page` never imports this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow import ArrowPage, PageColumns, arrival_micros
from .record_layout import Layout, first_record_fields, layout
from .vector_base64 import decode_column, spans_as_array

_RECORDS_KEY = b'"Records":['
_RECORDS_END = b"}]"
_JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_OUTER_KEYS = {"NextShardIterator": str, "MillisBehindLatest": int}
_QUOTE, _BACKSLASH, _SPACE = 34, b"\\", 32


class NotThisLayout(ValueError):
    """The body is not of the one layout this module cuts; the next decoder takes it."""


@dataclass(frozen=True)
class PlainBody:
    """A GetRecords body's columns, its Python lists and its outer fields."""

    columns: PageColumns
    data: list[bytes]
    sequence_numbers: list[str]
    partition_keys: list[str]
    arrival_epoch: list[float]
    encryption_types: list[str | None]
    next_iterator: str | None
    millis_behind_latest: int | None


def cut_body(body: bytes) -> PlainBody:
    """The body's records as Arrow columns; :class:`NotThisLayout` for a body of any other layout."""
    raw = np.frombuffer(body, dtype=np.uint8)
    if _BACKSLASH in body or (len(raw) and int(raw.min()) < _SPACE):
        raise NotThisLayout("an escape or a control character")
    if not body.isascii():
        body.decode("utf-8")  # UnicodeDecodeError is a ValueError: the next decoder says what json.loads says
    opening, closing = body.find(_RECORDS_KEY), body.rfind(_RECORDS_END)
    if opening < 0 or closing < opening:
        raise NotThisLayout("no records")
    quotes = np.flatnonzero(raw == _QUOTE)
    first = int(np.searchsorted(quotes, opening)) + 2  # past the two quotes of "Records"
    shape = layout(first_record_fields(body, quotes, first))
    count = int(np.searchsorted(quotes, closing)) - first  # the quotes up to the last record's '}'
    if count <= 0 or count % shape.quotes:
        raise NotThisLayout("not the same quotes in every record")
    n = count // shape.quotes
    q = quotes[first : first + count].reshape(n, shape.quotes).astype(np.int64)
    closes = np.append(q[1:, 0] - 3, closing)  # each record's '}': 3 bytes before the next one's first quote
    begin = opening + len(_RECORDS_KEY)
    spans = _value_spans(q, shape, closes)
    _check_skeleton(raw, q, shape, begin, closes)
    outer = _outer_fields(body[:opening], body[closing + 1 :])
    return _columns(raw, spans, outer)


def cut_page(body: bytes) -> ArrowPage:
    """The page of a body of the plain layout, with its Arrow columns; :class:`NotThisLayout` for any other body.

    Every way the cut can fail on a body it was not made for (an index past
    the quotes, Arrow refusing a value) is :class:`NotThisLayout` here, so a
    caller falls back on that one error.
    """
    try:
        cut = cut_body(body)
    except (IndexError, pa.ArrowException) as exc:
        raise NotThisLayout(type(exc).__name__) from None
    return ArrowPage(
        partition_keys=cut.partition_keys,
        data=cut.data,
        sequence_numbers=cut.sequence_numbers,
        arrival_epoch=cut.arrival_epoch,
        encryption_types=cut.encryption_types,
        next_iterator=cut.next_iterator,
        millis_behind_latest=cut.millis_behind_latest,
        columns=cut.columns,
        columns_of=cut.sequence_numbers,
    )


def _value_spans(q: np.ndarray, shape: Layout, closes: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each field's value: starts and stops, one per record."""
    spans = {}
    for i, name in enumerate(shape.fields):
        key = shape.key_quotes[i]
        if shape.is_number(name):
            start = q[:, key + 1] + 2  # past '":'
            stop = q[:, shape.key_quotes[i + 1]] - 1 if i + 1 < len(shape.fields) else closes
        else:
            start, stop = q[:, key + 2] + 1, q[:, key + 3]
        if (stop < start).any():
            raise NotThisLayout("quotes out of place")
        spans[name] = (start, stop)
    return spans


def _check_skeleton(raw: np.ndarray, q: np.ndarray, shape: Layout, begin: int, closes: np.ndarray) -> None:
    """Every byte of the records that is not a value must be the layout's.

    The bytes before each value (``{`` or ``,``, the key, ``:``, a string's
    opening quote) are read as 8-byte words at their places relative to the
    quotes (an unaligned strided view); a string value's closing quote must
    be followed at once by the next key's ``,`` or the record's ``}``; and
    the records must follow each other with ``,``. The quotes of those bytes
    are then where ``q`` says, since ``q`` holds every quote of the body.
    """
    if int(q[0, 0]) - 1 != begin:
        raise NotThisLayout("the first record is not first")
    words = np.ndarray((len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,))
    positions = q[:, shape.word_quotes] + shape.word_offsets
    if positions.max() >= len(words) or (words[positions] != shape.word_values).any():
        raise NotThisLayout("bytes between the values are not the layout's")
    for i, name in enumerate(shape.fields):
        if shape.is_number(name):
            continue  # its value runs to the next ',' or '}', and is checked as a JSON number
        after = q[:, shape.key_quotes[i] + 3] + 1
        follows = q[:, shape.key_quotes[i + 1]] - 1 if i + 1 < len(shape.fields) else closes
        if (after != follows).any():
            raise NotThisLayout("bytes after a string value")
    if (raw[closes] != ord("}")).any() or (raw[closes[:-1] + 1] != ord(",")).any():
        raise NotThisLayout("records not one after the other")


def _outer_fields(head: bytes, tail: bytes) -> dict[str, Any]:
    """The fields before and after the records: each known key at most once, of its JSON type, no other Records."""
    if not tail.startswith(b"]") or not head.startswith(b"{"):
        raise NotThisLayout("records not in one array")
    inner_head = head[1:].removesuffix(b",")
    if inner_head == head[1:] and inner_head:
        raise NotThisLayout("no comma before Records")
    rest = tail[1:]
    if rest.startswith(b","):
        rest = rest[1:]
    elif rest != b"}":
        raise NotThisLayout("no comma after the records")
    text = b"{" + inner_head + (b"," if inner_head and rest != b"}" else b"") + rest
    pairs = json.loads(text, object_pairs_hook=list)  # ValueError when not JSON: the next decoder reports it
    keys = [key for key, _ in pairs]
    if not isinstance(pairs, list) or len(set(keys)) != len(keys) or "Records" in keys:
        raise NotThisLayout("a key twice, or Records again")
    outer = dict(pairs)
    if outer.get("ChildShards") not in (None, []):  # null or [] (kinesis-mock writes null) read as none
        raise NotThisLayout("ChildShards: a closed shard's last page, which the reference decoder reads")
    for key, kind in _OUTER_KEYS.items():
        value = outer.get(key)
        if value is not None and (type(value) is not kind):
            raise NotThisLayout(f"{key} is not a {kind.__name__}")
    return outer


def _columns(raw: np.ndarray, spans: dict[str, tuple[np.ndarray, np.ndarray]], outer: dict[str, Any]) -> PlainBody:
    def column(name: str, type_: pa.DataType) -> pa.Array:
        start, stop = spans[name]
        return spans_as_array(raw, start, stop - start, type_)

    sequence_numbers, keys = column("SequenceNumber", pa.string()), column("PartitionKey", pa.string())
    stamps = column("ApproximateArrivalTimestamp", pa.string())
    if not pc.all(pc.match_substring_regex(stamps, _JSON_NUMBER)).as_py():
        raise NotThisLayout("a timestamp is not a JSON number")
    seconds = pc.cast(stamps, pa.float64())
    if not pc.all(pc.is_finite(seconds)).as_py():
        raise NotThisLayout("a timestamp out of float range")
    data = decode_column(column("Data", pa.binary()))
    n = len(sequence_numbers)
    encryption = column("EncryptionType", pa.string()).to_pylist() if "EncryptionType" in spans else [None] * n
    columns = PageColumns(partition_keys=keys, data=data.column, sequence_numbers=sequence_numbers,
                          arrival=arrival_micros(seconds))
    return PlainBody(
        columns=columns,
        data=data.column.to_pylist(),
        sequence_numbers=sequence_numbers.to_pylist(),
        partition_keys=keys.to_pylist(),
        arrival_epoch=seconds.to_pylist(),
        encryption_types=encryption,
        next_iterator=outer.get("NextShardIterator"),
        millis_behind_latest=outer.get("MillisBehindLatest"),
    )
