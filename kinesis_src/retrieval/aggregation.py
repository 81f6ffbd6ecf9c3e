"""KPL de-aggregation: one Kinesis record holding many user records becomes those user records.

As in the KCL, a record that is not a valid aggregate passes through whole (or raises, strict).
Format, edge cases and differences from the KCL: docs/consumer.md, "KPL aggregates"."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Sequence

from ..errors import MalformedAggregateError
from ..records import RecordPage

log = logging.getLogger(__name__)

AGGREGATE_MAGIC = b"\xf3\x89\x9a\xc2"
_DIGEST = 16
_SHORTEST = len(AGGREGATE_MAGIC) + _DIGEST  # magic + digest: no protobuf, not an aggregate
_PREFIX = itemgetter(slice(0, len(AGGREGATE_MAGIC)))


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
    """The page with every KPL aggregate replaced by its user records (no aggregate: the same page).
    ``strict`` raises :class:`~kinesis_src.errors.MalformedAggregateError` instead of passing a
    malformed aggregate through whole; ``shard_id`` and ``stream`` only name it."""
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


# -- the protobuf, through protobuf's C runtime (upb) --------------------------------------------------


def _decode(data: bytes) -> tuple[list[str], list[str | None] | None, list[bytes]]:
    """Partition keys, explicit hash keys (None: the aggregate has none) and data of one aggregate's
    user records; raises _Malformed with the reason (never the contents)."""
    size = len(data)
    if size <= _SHORTEST:
        if size < _SHORTEST:
            raise _Malformed(f"{size} bytes is shorter than the magic and the MD5 digest")
        raise _Malformed("no protobuf between the magic and the MD5 digest; the KCL does not expand such a record either")
    end = size - _DIGEST
    body = memoryview(data)[4:end]
    if hashlib.md5(body).digest() != data[end:]:
        raise _Malformed("MD5 digest does not match")
    message = _parsed(body)
    records = list(message.records)  # each record's Python object made once, for the three C passes below
    if not records:
        return [], None, []
    pk_index = list(map(_PK_INDEX, records))
    payloads = list(map(_DATA, records))
    keys = list(map(_texts(message.partition_key_table, pk_index, "partition key").__getitem__, pk_index))
    ehk_index = list(map(_EHK_INDEX, records))
    if ehk_index.count(_NO_INDEX) == len(ehk_index):  # in C, cheaper than a Python loop of HasField
        return keys, None, payloads
    ehk_rows = [(row, index) for row, index in enumerate(ehk_index) if index != _NO_INDEX]
    texts = _texts(message.explicit_hash_key_table, [i for _, i in ehk_rows], "explicit hash key")
    hash_keys: list[str | None] = [None] * len(payloads)
    for row, i in ehk_rows:
        hash_keys[row] = texts[i]
    return keys, hash_keys, payloads


def _parsed(body: memoryview) -> Any:
    """The ``AggregatedRecord``; _Malformed when it is not valid protobuf or lacks a required field."""
    from google.protobuf.message import DecodeError  # protobuf is imported by the first aggregate only

    message = aggregated_record_class()()
    try:
        message.ParseFromString(body)
    except DecodeError:
        problem = "not valid protobuf (corrupt or truncated wire format)"
    else:
        if message.IsInitialized():
            return message
        missing = ", ".join(message.FindInitializationErrors())  # field paths such as records[0].data
        problem = f"a required field is missing: {missing}"
    raise _Malformed(problem)


def _texts(table: Sequence[bytes], indexes: list[int], what: str) -> list[str]:
    """The key table decoded, once ``indexes`` (those used, never empty) are known to lie inside it.

    Bytes that are not UTF-8 become U+FFFD, as in the KCL (the tables are read as ``bytes``)."""
    worst = max(indexes)
    if worst >= len(table):
        raise _Malformed(f"{what} index {worst} is outside the table of {len(table)}")
    return [entry.decode("utf-8", "replace") for entry in table]


_PK_INDEX = attrgetter("partition_key_index")
_EHK_INDEX = attrgetter("explicit_hash_key_index")
_DATA = attrgetter("data")
_NO_INDEX = 2**64 - 1
"""The explicit hash key index of a user record without one: the field's declared default."""


@lru_cache(maxsize=1)
def aggregated_record_class() -> Any:
    """The ``AggregatedRecord`` message class, built from its descriptor (no generated code, no
    protoc): docs/consumer.md's schema, but key tables and tags as ``bytes`` (decoded here, as the
    KCL does), and an absent explicit hash key index read as :data:`_NO_INDEX`, so one C pass finds
    those present."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    required, optional, repeated = field.LABEL_REQUIRED, field.LABEL_OPTIONAL, field.LABEL_REPEATED
    schema = descriptor_pb2.FileDescriptorProto(name="kinesis_src_kpl.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in (
        ("AggregatedRecord", [(1, "partition_key_table", repeated, field.TYPE_BYTES, ""),
                              (2, "explicit_hash_key_table", repeated, field.TYPE_BYTES, ""),
                              (3, "records", repeated, field.TYPE_MESSAGE, "Record")]),
        ("Record", [(1, "partition_key_index", required, field.TYPE_UINT64, ""),
                    (2, "explicit_hash_key_index", optional, field.TYPE_UINT64, "", str(_NO_INDEX)),
                    (3, "data", required, field.TYPE_BYTES, ""),
                    (4, "tags", repeated, field.TYPE_MESSAGE, "Tag")]),
        ("Tag", [(1, "key", required, field.TYPE_BYTES, ""), (2, "value", optional, field.TYPE_BYTES, "")]),
    ):
        message = schema.message_type.add(name=name)
        for number, field_name, label, kind, type_name, *default in fields:
            declared = message.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                declared.type_name = f".{_PACKAGE}.{type_name}"
            if default:
                declared.default_value = default[0]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.AggregatedRecord"))


_PACKAGE = "kinesis_src.kpl"
