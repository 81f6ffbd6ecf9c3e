"""KPL de-aggregation: one Kinesis record holding many user records becomes those user records.

The format (the KPL's ``aggregation-format.md``, written by ``aws_kinesis_agg``
too, read by the KCL's ``AggregatorUtil``): the magic bytes ``F3 89 9A C2``,
a protobuf ``AggregatedRecord``, then the 16-byte MD5 digest of that
protobuf::

    message AggregatedRecord {
      repeated string partition_key_table = 1;
      repeated string explicit_hash_key_table = 2;
      repeated Record records = 3;
    }
    message Record {
      required uint64 partition_key_index = 1;
      optional uint64 explicit_hash_key_index = 2;
      required bytes data = 3;
      repeated Tag tags = 4;
    }
    message Tag { required string key = 1; optional string value = 2; }

Each user record becomes one row with its own partition key, data and
explicit hash key (None when it has none), the aggregate's sequence number,
arrival time and encryption type, and its index in the aggregate as
sub-sequence number. A plain record on a page that had aggregates is one
row with sub-sequence number 0 and no explicit hash key.

**Cost.** A page on which no record starts with the magic is returned as
the same object, after one 4-byte prefix comparison per record, done in C
(``magic in map(itemgetter(slice(0, 4)), data)``). The decoder is
hand-written: it reads only the fields above, straight from the bytes, and
builds the output columns without protobuf message objects. It needs no
protobuf runtime, is as fast as protobuf's C parser (upb) behind the same
columns and about 4x faster per user record than ``aws_kinesis_agg``'s
deaggregator (benchmarks/bench_kpl.py, docs/performance.md);
tests/unit/test_aggregation.py checks it reads what ``aws_kinesis_agg`` reads.

**What is not an aggregate.** Like the KCL, a record with the magic whose
MD5 digest does not match, whose protobuf does not parse (truncated, an
invalid wire type or field number, a required field missing), or
that is too short to hold a protobuf (at most 20 bytes: magic and digest
only) is passed through whole as one plain row; here it is also logged
(shard, stream, sequence number and the problem, never the contents) and
counted in :attr:`Deaggregated.malformed`. A partition or explicit hash key
index outside its table is handled the same way (the KCL logs an error and
keeps the user records before the bad one; a page here holds whole
aggregates or none). With ``strict=True`` each of these raises
:class:`~kinesis_src.errors.MalformedAggregateError` instead.

**Empty aggregates.** An aggregate whose protobuf parses but holds no user
records (only key tables, or only unknown fields) yields no rows, and counts
in :attr:`Deaggregated.aggregates`; the KCL yields nothing for it either.
Magic plus the digest of an empty protobuf (20 bytes) is "too short" above:
the KCL and ``aws_kinesis_agg`` do not recognise it as an aggregate and pass
it through, so it is passed through here too (with the warning).

Unknown fields are skipped by wire type (groups included), as protobuf
does; a field number of 0 or above 2^29 - 1, or a wire type of 4 (outside a
group), 6 or 7, is invalid protobuf. Key table entries that are not UTF-8
are decoded with U+FFFD in place of the bad bytes, as the KCL's (Java)
protobuf does for proto2 strings.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

from ..errors import MalformedAggregateError
from ..records import RecordPage

log = logging.getLogger(__name__)

AGGREGATE_MAGIC = b"\xf3\x89\x9a\xc2"
_DIGEST = 16
_SHORTEST = len(AGGREGATE_MAGIC) + _DIGEST  # magic + digest: no protobuf, not an aggregate
_PREFIX = itemgetter(slice(0, len(AGGREGATE_MAGIC)))

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
# The decoder compares tags (field number << 3 | wire type) as literals, for speed: AggregatedRecord
# 0x0A, 0x12, 0x1A (fields 1, 2, 3, length-delimited); Record 0x08, 0x10 (1, 2, varint), 0x1A, 0x22
# (3, 4, length-delimited); Tag 0x0A (1).

_TRUNCATED = "truncated: a length or varint runs past the end of the protobuf"


@dataclass(frozen=True)
class Deaggregated:
    """One page of user records, and what was expanded or passed through on the way."""

    page: RecordPage
    """One row per user record; the very page passed in when no record had the magic."""
    aggregates: int
    """Aggregated Kinesis records expanded (empty ones included)."""
    malformed: int
    """Records with the magic passed through whole (non-strict): bad MD5, unparsable, bad index, too short."""


class _Malformed(ValueError):
    """Why an aggregate does not decode; never quotes its contents."""


def deaggregate(page: RecordPage, *, strict: bool = False, shard_id: str = "?", stream: str = "?") -> Deaggregated:
    """The page with every KPL aggregate replaced by its user records (see the module docstring).

    ``strict`` raises :class:`~kinesis_src.errors.MalformedAggregateError` on
    a malformed aggregate instead of passing it through whole with a
    warning; ``shard_id`` and ``stream`` only name the record in that
    warning or error.
    """
    if AGGREGATE_MAGIC not in map(_PREFIX, page.data):
        return Deaggregated(page, 0, 0)
    return _expand(page, strict, shard_id, stream)


def _expand(page: RecordPage, strict: bool, shard_id: str, stream: str) -> Deaggregated:
    keys: list[str | None] = []
    hash_keys: list[str | None] = []
    datas: list[bytes] = []
    seqs: list[str] = []
    arrivals: list[float | None] = []
    encryptions: list[str | None] = []
    subs: list[int] = []
    aggregates = malformed = 0
    magic = AGGREGATE_MAGIC
    for i, data in enumerate(page.data):
        if data[:4] == magic:
            try:
                user_keys, user_hash_keys, user_datas = _decode(data)
            except _Malformed as exc:
                problem = str(exc)
            else:
                problem = None
            if problem is not None:  # reported outside the except block: no chained exception in strict mode
                malformed += 1
                _report(page.sequence_numbers[i], shard_id, stream, problem, strict)
            else:
                aggregates += 1
                n = len(user_datas)
                keys += user_keys
                hash_keys += user_hash_keys if user_hash_keys is not None else repeat(None, n)
                datas += user_datas
                seqs += repeat(page.sequence_numbers[i], n)
                arrivals += repeat(page.arrival_epoch[i], n)
                encryptions += repeat(page.encryption_types[i], n)
                subs += range(n)
                continue
        keys.append(page.partition_keys[i])
        hash_keys.append(None)
        datas.append(data)
        seqs.append(page.sequence_numbers[i])
        arrivals.append(page.arrival_epoch[i])
        encryptions.append(page.encryption_types[i])
        subs.append(0)
    out = RecordPage(
        partition_keys=keys,
        data=datas,
        sequence_numbers=seqs,
        arrival_epoch=arrivals,
        encryption_types=encryptions,
        next_iterator=page.next_iterator,
        millis_behind_latest=page.millis_behind_latest,
        child_shards=page.child_shards,
        sub_sequence_numbers=subs,
        explicit_hash_keys=hash_keys,
    )
    return Deaggregated(out, aggregates, malformed)


def _report(sequence: str, shard_id: str, stream: str, problem: str, strict: bool) -> None:
    where = f"KPL aggregate {sequence} in shard {shard_id} of stream {stream!r}"
    if strict:
        raise MalformedAggregateError(
            f"{where} is malformed ({problem}); turn strict aggregation off (strictAggregation=false in Spark, "
            "strict_aggregation=False in Python) to pass such records through whole as one record, as the KCL does"
        )
    log.warning("%s is malformed (%s); passing it through whole as one record (contents not shown)", where, problem)


# -- the protobuf, by hand ----------------------------------------------------------------


def _decode(data: bytes) -> tuple[list[str], list[str | None] | None, list[bytes]]:
    """Partition keys, explicit hash keys (None: the aggregate has none) and data of one aggregate's
    user records; raises _Malformed with the reason.

    The hot loop is written for the interpreter: constants are literals,
    and a user record laid out as the KPL and ``aws_kinesis_agg`` write it
    (``08 <index> 1A <length> <data>``, one-byte index and length) is
    recognised in one test. Everything else (longer varints, explicit hash
    keys, tags, unknown fields, other field orders) takes the general path.
    Reads index ``data`` itself (no copy); every length is checked against
    the end of the protobuf, so a read that strays into the digest is caught
    by the check that follows it, and one past the record by IndexError.
    """
    size = len(data)
    if size <= _SHORTEST:
        if size < _SHORTEST:
            raise _Malformed(f"{size} bytes is shorter than the magic and the MD5 digest")
        raise _Malformed("no protobuf between the magic and the MD5 digest; the KCL does not expand such a record either")
    end = size - _DIGEST
    if hashlib.md5(memoryview(data)[4:end]).digest() != data[end:]:
        raise _Malformed("MD5 digest does not match")
    pk_table: list[bytes] = []
    ehk_table: list[bytes] = []
    pk_index: list[int] = []
    payloads: list[bytes] = []
    ehk_rows: list[tuple[int, int]] = []  # (user record, explicit hash key index), only where one is set
    add_index = pk_index.append
    add_payload = payloads.append
    pos = 4
    try:
        while pos < end:
            tag = data[pos]
            pos += 1
            if tag & 0x80:  # a tag of more than one byte: another field, or a non-canonical encoding
                tag, pos = _varint(data, pos, tag)
            if tag == 0x1A:  # records (3)
                n = data[pos]
                pos += 1
                if n & 0x80:
                    n, pos = _varint(data, pos, n)
                stop = pos + n
                if stop > end:
                    raise _Malformed(_TRUNCATED)
                key = data[pos + 1]
                n = data[pos + 3]
                if (key | n) < 0x80 and data[pos] == 0x08 and data[pos + 2] == 0x1A and pos + 4 + n == stop:
                    add_index(key)
                    add_payload(data[pos + 4 : stop])
                    pos = stop
                    continue
                key = hash_key = payload = None
                while pos < stop:
                    tag = data[pos]
                    pos += 1
                    if tag & 0x80:
                        tag, pos = _varint(data, pos, tag)
                    if tag == 0x1A:  # data (3)
                        n = data[pos]
                        pos += 1
                        if n & 0x80:
                            n, pos = _varint(data, pos, n)
                        n += pos
                        if n > stop:
                            raise _Malformed(_TRUNCATED)
                        payload = data[pos:n]
                        pos = n
                    elif tag == 0x08:  # partition_key_index (1)
                        key = data[pos]
                        pos += 1
                        if key & 0x80:
                            key, pos = _varint(data, pos, key)
                    elif tag == 0x10:  # explicit_hash_key_index (2)
                        hash_key = data[pos]
                        pos += 1
                        if hash_key & 0x80:
                            hash_key, pos = _varint(data, pos, hash_key)
                    elif tag == 0x22:  # tags (4)
                        pos = _tag(data, pos, stop)
                    else:
                        pos = _skip(data, pos, tag, stop)
                if pos != stop:
                    raise _Malformed("a field runs past the end of its user record")
                if key is None or payload is None:
                    raise _Malformed("a user record lacks its partition key index or its data (both are required)")
                if hash_key is not None:
                    ehk_rows.append((len(payloads), hash_key))
                add_index(key)
                add_payload(payload)
            elif tag == 0x0A or tag == 0x12:  # partition_key_table (1), explicit_hash_key_table (2)
                n = data[pos]
                pos += 1
                if n & 0x80:
                    n, pos = _varint(data, pos, n)
                stop = pos + n
                if stop > end:
                    raise _Malformed(_TRUNCATED)
                (pk_table if tag == 0x0A else ehk_table).append(data[pos:stop])
                pos = stop
            else:
                pos = _skip(data, pos, tag, end)
    except IndexError:
        raise _Malformed(_TRUNCATED) from None
    if not payloads:
        return [], None, []
    keys = list(map(_texts(pk_table, pk_index, "partition key").__getitem__, pk_index))
    hash_keys: list[str | None] | None = None
    if ehk_rows:
        texts = _texts(ehk_table, [i for _, i in ehk_rows], "explicit hash key")
        hash_keys = [None] * len(payloads)
        for row, i in ehk_rows:
            hash_keys[row] = texts[i]
    return keys, hash_keys, payloads


def _texts(table: list[bytes], indexes: list[int], what: str) -> list[str]:
    """The key table decoded, once ``indexes`` (those used, never empty) are known to lie inside it.

    Bytes that are not UTF-8 become U+FFFD, as in the KCL (protobuf does not
    validate proto2 strings; the KPL never writes such keys).
    """
    worst = max(indexes)
    if worst >= len(table):
        raise _Malformed(f"{what} index {worst} is outside the table of {len(table)}")
    return [entry.decode("utf-8", "replace") for entry in table]


def _tag(data: bytes, pos: int, stop: int) -> int:
    """Past one ``Tag`` (length-delimited); checks it has its required key, as the KCL's protobuf does."""
    n = data[pos]
    pos += 1
    if n & 0x80:
        n, pos = _varint(data, pos, n)
    end = pos + n
    if end > stop:
        raise _Malformed(_TRUNCATED)
    has_key = False
    while pos < end:
        tag = data[pos]
        pos += 1
        if tag & 0x80:
            tag, pos = _varint(data, pos, tag)
        if tag == 0x0A:
            has_key = True
        pos = _skip(data, pos, tag, end)
    if pos != end:
        raise _Malformed("a field runs past the end of a tag")
    if not has_key:
        raise _Malformed("a tag lacks its key (required)")
    return pos


def _skip(data: bytes, pos: int, tag: int, stop: int) -> int:
    """Past the value of a field with this (whole) ``tag``, by its wire type; ``stop`` bounds it."""
    wire = tag & 7
    field = tag >> 3
    if not 0 < field < 1 << 29:
        raise _Malformed(f"field number {field} is invalid protobuf")
    if wire == _VARINT:
        first = pos
        while data[pos] & 0x80:
            pos += 1
        pos += 1
        if pos - first > 10:
            raise _Malformed("a varint is longer than 10 bytes")
    elif wire == _LENGTH:
        n = data[pos]
        pos += 1
        if n & 0x80:
            n, pos = _varint(data, pos, n)
        pos += n
    elif wire == _FIXED64:
        pos += 8
    elif wire == _FIXED32:
        pos += 4
    elif wire == _START_GROUP:  # deprecated, never written by the KPL, but protobuf skips it when unknown
        while True:
            if pos >= stop:
                raise _Malformed(_TRUNCATED)
            inner = data[pos]
            pos += 1
            if inner & 0x80:
                inner, pos = _varint(data, pos, inner)
            if inner & 7 == _END_GROUP:
                if inner >> 3 != field:
                    raise _Malformed("a group ends with another field's end-group tag")
                break
            pos = _skip(data, pos, inner, stop)
    else:
        raise _Malformed(f"wire type {wire} is not valid here")
    if pos > stop:
        raise _Malformed(_TRUNCATED)
    return pos


def _varint(body: bytes, pos: int, first: int) -> tuple[int, int]:
    """A varint whose first byte (``first``, continuation bit set) was read; ``pos`` is past it."""
    result = first & 0x7F
    shift = 7
    while True:
        byte = body[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("a varint is longer than 10 bytes")
