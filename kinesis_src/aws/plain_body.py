"""GetRecords bodies of the one layout Kinesis writes, cut into Arrow columns without a JSON parser.

A JSON parser (``json.loads`` or ``pyarrow.json``) costs ~1.2-1.4 µs a record
of 200 B here, the largest part of a Spark task's CPU per record
(docs/performance.md). But a GetRecords body is always written the same
way: compact JSON, records whose fields come in one order,

    {"SequenceNumber":"…","ApproximateArrivalTimestamp":1.7E9,"Data":"…","PartitionKey":"…"}

and no escapes in any of them (sequence numbers are digits, Data is base64).
For such a body every byte is known but the values, and the values are
found from the positions of the body's double quotes (one numpy pass):

- the body holds no backslash (so every ``"`` delimits a string) and no
  control character; it is UTF-8 (checked whole when not ASCII);
- ``"Records":[`` opens the records; the fields around it (the next
  iterator, ``MillisBehindLatest``) are parsed with ``json.loads``, and must
  not repeat a key or hold another ``Records``;
- with 14 quotes a record, the values' spans are read off the quote
  positions, and **everything between the values** is compared, in one bytes
  comparison, with what that layout puts there (:func:`_check_skeleton`). So a body that is anything else (a field missing,
  added, reordered, whitespace, ``EncryptionType``) does not match;
- timestamps must be JSON numbers (a regular expression over the column)
  and finite; Data must be canonical base64 (:mod:`.vector_base64`).

Whatever does not match raises :class:`NotThisLayout` and the caller tries
the next decoder (``pyarrow.json``, then the reference), so the page or the
error is the reference's in every case (tests/unit/test_arrow_decode.py and
tests/unit/test_vector_base64.py run all decoders on the same bodies).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow import PageColumns, arrival_micros
from .vector_base64 import decode_column, spans_as_array

_RECORDS_KEY = b'"Records":['
_RECORDS_END = b'"}]'
_QUOTES_PER_RECORD = 14
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
    count = int(np.searchsorted(quotes, closing)) + 1 - first  # to the last record's last quote
    if count <= 0 or count % _QUOTES_PER_RECORD:
        raise NotThisLayout("not 14 quotes a record")
    n = count // _QUOTES_PER_RECORD
    q = quotes[first : first + count].reshape(n, _QUOTES_PER_RECORD).astype(np.int64)
    begin, end = opening + len(_RECORDS_KEY), int(q[-1, 13]) + 2
    _check_skeleton(body, q, begin, end)
    spans = _value_spans(q)
    outer = _outer_fields(body[:opening], body[end:])
    return _columns(raw, spans, outer)


def _value_spans(q: np.ndarray) -> np.ndarray:
    """(n, 4, 2) starts and stops of each record's sequence number, timestamp, Data and partition key."""
    starts = np.stack([q[:, 2] + 1, q[:, 5] + 2, q[:, 8] + 1, q[:, 12] + 1], axis=1)
    stops = np.stack([q[:, 3], q[:, 6] - 1, q[:, 9], q[:, 13]], axis=1)
    if (stops < starts).any():
        raise NotThisLayout("quotes out of place")
    return np.stack([starts, stops], axis=2)


def _check_skeleton(body: bytes, q: np.ndarray, begin: int, end: int) -> None:
    """Every byte of the records that is not a value must be the layout's.

    The layout's bytes around the values are read as 8-byte words at their
    places relative to the quotes (an unaligned strided view: 10 words a
    record), and the records must follow each other with ``,`` between
    them. The quotes of those bytes are then where ``q`` says, since ``q``
    holds every quote of the body.
    """
    if int(q[0, 0]) - 1 != begin or int(q[-1, 13]) + 2 != end or (q[1:, 0] != q[:-1, 13] + 4).any():
        raise NotThisLayout("records not one after the other")
    words = np.ndarray((len(body) - 7,), dtype="<u8", buffer=body, strides=(1,))
    positions = q[:, _WORD_QUOTES] + _WORD_OFFSETS
    if positions.max() >= len(words) or (words[positions] != _WORD_VALUES).any():
        raise NotThisLayout("bytes between the values are not the layout's")
    raw = np.frombuffer(body, dtype=np.uint8)
    if (raw[q[:, 13] + 1] != ord("}")).any() or (raw[q[:-1, 13] + 2] != ord(",")).any():
        raise NotThisLayout("a record not closed")


def _layout_words() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which quote, which offset from it, and which 8 bytes: the layout's bytes around the values."""
    gaps = [  # (quote column the gap is placed by, its offset from that quote, its bytes)
        (0, -1, b'{"SequenceNumber":"'),
        (3, 0, b'","ApproximateArrivalTimestamp":'),
        (6, -1, b',"Data":"'),
        (9, 0, b'","PartitionKey":"'),
    ]
    quotes, offsets, values = [], [], []
    for column, offset, text in gaps:
        for start in sorted({*range(0, len(text) - 7, 8), len(text) - 8}):
            quotes.append(column)
            offsets.append(offset + start)
            values.append(int.from_bytes(text[start : start + 8], "little"))
    return np.array(quotes), np.array(offsets, dtype=np.int64), np.array(values, dtype=np.uint64)


_WORD_QUOTES, _WORD_OFFSETS, _WORD_VALUES = _layout_words()


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
    if not isinstance(pairs, list) or len(set(keys)) != len(keys) or {"Records", "ChildShards"} & set(keys):
        raise NotThisLayout("a key twice, Records again, or ChildShards (the reference decoder reads them)")
    outer = dict(pairs)
    for key, kind in _OUTER_KEYS.items():
        value = outer.get(key)
        if value is not None and (type(value) is not kind):
            raise NotThisLayout(f"{key} is not a {kind.__name__}")
    return outer


def _columns(raw: np.ndarray, spans: np.ndarray, outer: dict[str, Any]) -> PlainBody:
    def column(field: int, type_: pa.DataType) -> pa.Array:
        starts = spans[:, field, 0]
        return spans_as_array(raw, starts, spans[:, field, 1] - starts, type_)

    sequence_numbers, keys = column(0, pa.string()), column(3, pa.string())
    stamps = column(1, pa.string())
    if not pc.all(pc.match_substring_regex(stamps, _JSON_NUMBER)).as_py():
        raise NotThisLayout("a timestamp is not a JSON number")
    seconds = pc.cast(stamps, pa.float64())
    if not pc.all(pc.is_finite(seconds)).as_py():
        raise NotThisLayout("a timestamp out of float range")
    data = decode_column(column(2, pa.binary()))
    columns = PageColumns(partition_keys=keys, data=data.column, sequence_numbers=sequence_numbers,
                          arrival=arrival_micros(seconds))
    return PlainBody(
        columns=columns,
        data=data.column.to_pylist(),
        sequence_numbers=sequence_numbers.to_pylist(),
        partition_keys=keys.to_pylist(),
        arrival_epoch=seconds.to_pylist(),
        next_iterator=outer.get("NextShardIterator"),
        millis_behind_latest=outer.get("MillisBehindLatest"),
    )
