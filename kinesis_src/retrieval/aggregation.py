"""KPL de-aggregation: one Kinesis record holding many user records becomes those user records.

The KPL (and ``aws_kinesis_agg``) write an aggregate as the magic bytes
``F3 89 9A C2``, a protobuf ``AggregatedRecord`` (partition key table = 1,
explicit hash key table = 2, records = 3; each record: partition key index
= 1, explicit hash key index = 2, data = 3, tags = 4), then the MD5 digest
of the protobuf. Each user record keeps the aggregate's sequence number and
arrival time and gets its index as sub-sequence number.

The decoder is hand-written: it reads only those fields, as memoryview
slices, without building protobuf message objects. It is several times
faster per user record than ``aws_kinesis_agg``'s deaggregator
(benchmarks/bench_kpl.py) and needs no protobuf runtime; tests check the two
agree. A page without aggregates costs one 4-byte prefix check per record
and is returned as the same object.

A record that has the magic but fails the MD5 check, or does not parse, is
passed through whole with a warning and a count, as the KCL does, unless
``strict`` asks for :class:`~kinesis_src.errors.MalformedAggregateError`.
An aggregate holding no user records yields none (the KCL does the same).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from ..errors import MalformedAggregateError
from ..records import RecordPage

log = logging.getLogger(__name__)

AGGREGATE_MAGIC = b"\xf3\x89\x9a\xc2"
_DIGEST = 16
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Deaggregated:
    """One page of user records, and what was expanded or passed through on the way."""

    page: RecordPage
    aggregates: int
    malformed: int


@dataclass(frozen=True)
class UserRecord:
    partition_key: str
    explicit_hash_key: str | None
    data: bytes


class _Malformed(ValueError):
    """Why an aggregate does not decode; never quotes its contents."""


def deaggregate(page: RecordPage, *, strict: bool = False, shard_id: str = "?", stream: str = "?") -> Deaggregated:
    """The page with every aggregate replaced by its user records (see the module docstring)."""
    magic = AGGREGATE_MAGIC
    if not any(d[:4] == magic for d in page.data):
        return Deaggregated(page, 0, 0)
    out = _Columns()
    aggregates = malformed = 0
    for i, data in enumerate(page.data):
        users = None
        if data[:4] == magic:
            try:
                users = decode_aggregate(data)
                aggregates += 1
            except _Malformed as exc:
                malformed += 1
                _malformed(page.sequence_numbers[i], shard_id, stream, str(exc), strict)
        if users is None:
            out.add(page, i, page.partition_keys[i], None, data, 0)
        else:
            for sub, user in enumerate(users):
                out.add(page, i, user.partition_key, user.explicit_hash_key, user.data, sub)
    return Deaggregated(out.page(page), aggregates, malformed)


def _malformed(sequence: str, shard_id: str, stream: str, problem: str, strict: bool) -> None:
    where = f"KPL aggregate {sequence} in shard {shard_id} of stream {stream!r}"
    if strict:
        raise MalformedAggregateError(
            f"{where} is malformed ({problem}); turn strict aggregation off (strictAggregation=false, "
            "strict_aggregation=False) to pass such records through whole, as the KCL does"
        )
    log.warning("%s is malformed (%s); passing it through as one record", where, problem)


class _Columns:
    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.hash_keys: list[str | None] = []
        self.data: list[bytes] = []
        self.rows: list[int] = []
        self.subs: list[int] = []

    def add(self, page: RecordPage, row: int, key: str | None, hash_key: str | None, data: bytes, sub: int) -> None:
        self.keys.append(key)
        self.hash_keys.append(hash_key)
        self.data.append(data)
        self.rows.append(row)
        self.subs.append(sub)

    def page(self, raw: RecordPage) -> RecordPage:
        rows = self.rows
        return RecordPage(
            partition_keys=self.keys,
            data=self.data,
            sequence_numbers=[raw.sequence_numbers[r] for r in rows],
            arrival_epoch=[raw.arrival_epoch[r] for r in rows],
            encryption_types=[raw.encryption_types[r] for r in rows],
            next_iterator=raw.next_iterator,
            millis_behind_latest=raw.millis_behind_latest,
            child_shards=raw.child_shards,
            sub_sequence_numbers=self.subs,
            explicit_hash_keys=self.hash_keys,
        )


# -- the protobuf, by hand ----------------------------------------------------------------


def decode_aggregate(data: bytes) -> list[UserRecord]:
    """The user records of one aggregate (magic included); raises _Malformed with the reason."""
    if len(data) < len(AGGREGATE_MAGIC) + _DIGEST:
        raise _Malformed(f"{len(data)} bytes is shorter than the magic and the MD5 digest")
    end = len(data) - _DIGEST
    if hashlib.md5(memoryview(data)[4:end]).digest() != data[end:]:
        raise _Malformed("MD5 digest does not match")
    keys: list[str] = []
    hash_keys: list[str] = []
    records: list[tuple[int, int | None, bytes]] = []
    pos = 4
    while pos < end:  # the hot loop: one-byte tags and lengths are the common case, read inline
        tag = data[pos]
        if tag & 0x80:
            tag, pos = _varint(data, pos, end)
        else:
            pos += 1
        if tag & 7 != _LENGTH:
            pos = _skip(data, pos, end, tag & 7)
            continue
        size = data[pos]
        if size & 0x80:
            size, pos = _varint(data, pos, end)
        else:
            pos += 1
        stop = pos + size
        if stop > end:
            raise _Malformed("a length-delimited field runs past the end (truncated)")
        field = tag >> 3
        if field == 3:
            records.append(_record(data, pos, stop))
        elif field == 1:
            keys.append(_text(data[pos:stop]))
        elif field == 2:
            hash_keys.append(_text(data[pos:stop]))
        pos = stop
    return [_user(k, h, d, keys, hash_keys) for k, h, d in records]


def _user(key: int, hash_key: int | None, data: bytes, keys: list[str], hash_keys: list[str]) -> UserRecord:
    if key >= len(keys):
        raise _Malformed(f"partition key index {key} is outside the table of {len(keys)}")
    if hash_key is not None and hash_key >= len(hash_keys):
        raise _Malformed(f"explicit hash key index {hash_key} is outside the table of {len(hash_keys)}")
    return UserRecord(keys[key], hash_keys[hash_key] if hash_key is not None else None, data)


def _record(data: bytes, pos: int, end: int) -> tuple[int, int | None, bytes]:
    key: int | None = None
    hash_key: int | None = None
    payload: bytes | None = None
    while pos < end:
        tag, pos = _varint(data, pos, end)
        field, wire = tag >> 3, tag & 7
        if wire == _VARINT and field in (1, 2):
            value, pos = _varint(data, pos, end)
            if field == 1:
                key = value
            else:
                hash_key = value
        elif wire == _LENGTH:
            size, pos = _varint(data, pos, end)
            if pos + size > end:
                raise _Malformed("a length-delimited field runs past the end (truncated)")
            if field == 3:
                payload = data[pos : pos + size]
            pos += size
        else:
            pos = _skip(data, pos, end, wire)
    if key is None or payload is None:
        raise _Malformed("a record lacks its partition key index or its data")
    return key, hash_key, payload


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Malformed("a key table entry is not UTF-8") from None


def _skip(data: bytes, pos: int, end: int, wire: int) -> int:
    """Past a field this decoder does not read (tags, unknown fields), by its wire type."""
    if wire == _VARINT:
        return _varint(data, pos, end)[1]
    if wire == _LENGTH:
        size, pos = _varint(data, pos, end)
        pos += size
    elif wire in (_FIXED64, _FIXED32):
        pos += 8 if wire == _FIXED64 else 4
    else:
        raise _Malformed(f"wire type {wire} is not valid here")
    if pos > end:
        raise _Malformed("a field runs past the end (truncated)")
    return pos


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise _Malformed("a varint runs past the end (truncated)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("a varint is longer than 10 bytes")
