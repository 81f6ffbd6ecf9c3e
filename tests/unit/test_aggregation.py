"""KPL de-aggregation (kinesis_src.retrieval.aggregation) against the reference, aws_kinesis_agg.

Aggregates are built with aws_kinesis_agg's RecordAggregator (and, for what
it never writes, with its protobuf classes or by hand); the hand-written
decoder must read them as aws_kinesis_agg's deaggregator does. Known, chosen
differences (docs/consumer.md, "KPL aggregates", compares each with the KCL):

- a malformed aggregate is one raw row here; the reference prints an error
  and keeps the user records before a bad key index;
- a missing required field is malformed here (the KCL's Java protobuf
  checks them; Python's upb does not);
- the reference gives a user record without an explicit hash key the
  table's first one when the table is not empty; here it has none.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

import pytest
from aws_kinesis_agg import (
    deaggregator,  # first: it puts its directory on sys.path, which messages_pb2 needs
    messages_pb2,
)
from aws_kinesis_agg.aggregator import RecordAggregator
from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_src.errors import MalformedAggregateError
from kinesis_src.records import ChildShard, RecordPage
from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC, Deaggregated, deaggregate

User = tuple[str, "str | None", bytes]

HASH_KEY = st.integers(min_value=0, max_value=2**128 - 1).map(str)
USER = st.tuples(st.text(min_size=1, max_size=20), st.one_of(st.none(), HASH_KEY), st.binary(max_size=300))
USERS = st.lists(USER, min_size=1, max_size=30)
PLAIN = st.binary(max_size=40).filter(lambda d: not d.startswith(AGGREGATE_MAGIC))

MANY_KEYS = [(f"key-{i}", None, bytes([i % 256]) * 200) for i in range(140)]  # two-byte indexes and lengths


def build(users: list[User]) -> bytes:
    agg = RecordAggregator()
    for key, hash_key, data in users:
        assert agg.add_user_record(key, data, hash_key) is None  # everything fits in one aggregate
    record = agg.clear_and_get()
    assert record is not None
    return record.get_contents()[2]


def framed(body: bytes) -> bytes:
    """An aggregate around any protobuf body, with a matching digest."""
    return AGGREGATE_MAGIC + body + hashlib.md5(body).digest()


def page(*datas: bytes) -> RecordPage:
    n = len(datas)
    return RecordPage(
        partition_keys=[f"p{i}" for i in range(n)],
        data=list(datas),
        sequence_numbers=[f"{49_000_000 + i}" for i in range(n)],
        arrival_epoch=[1_700_000_000.0 + i for i in range(n)],
        encryption_types=["KMS" if i % 2 else None for i in range(n)],
        next_iterator="next-iterator",
        millis_behind_latest=42,
        child_shards=(ChildShard("shardId-000000000002", ("shardId-000000000001",), 0, 2**128 - 1),),
    )


def rows(result: RecordPage) -> list[tuple[Any, ...]]:
    """(partition key, explicit hash key, data, sequence number, sub-sequence number, arrival, encryption)."""
    n = len(result)
    return list(
        zip(
            result.partition_keys,
            result.explicit_hash_keys or [None] * n,
            result.data,
            result.sequence_numbers,
            result.sub_sequence_numbers or [0] * n,
            result.arrival_epoch,
            result.encryption_types,
        )
    )


def reference(raw: RecordPage) -> list[tuple[Any, ...]]:
    """aws_kinesis_agg's reading of the page, in the same row shape (its explicit hash keys included)."""
    encryption = dict(zip(raw.sequence_numbers, raw.encryption_types))
    records = [
        {"Data": d, "PartitionKey": k, "SequenceNumber": s, "ApproximateArrivalTimestamp": t}
        for d, k, s, t in zip(raw.data, raw.partition_keys, raw.sequence_numbers, raw.arrival_epoch)
    ]
    out = []
    for record in deaggregator.iter_deaggregate_records(records, data_format="Boto3"):
        k = record["kinesis"]
        aggregated = k.get("aggregated", False)
        out.append((
            _text(k["partitionKey"]),
            _text(k.get("explicitHashKey")),
            base64.b64decode(k["data"]) if aggregated else k["data"],
            k["sequenceNumber"],
            k.get("subSequenceNumber", 0),
            k["approximateArrivalTimestamp"],
            encryption[k["sequenceNumber"]],
        ))
    return out


def _text(value: str | bytes | None) -> str | None:
    """upb hands out a proto2 string that is not UTF-8 as bytes; the KCL (and we) decode it with U+FFFD."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def assert_agrees_with_reference(raw: RecordPage, result: Deaggregated) -> None:
    ours, ref = rows(result.page), reference(raw)
    assert len(ours) == len(ref)
    for mine, theirs in zip(ours, ref):
        assert mine[:1] + mine[2:] == theirs[:1] + theirs[2:]
        if mine[1] is not None:  # the reference also fills in hash keys that were never set (see above)
            assert mine[1] == theirs[1]


# -- agreement with aws_kinesis_agg ------------------------------------------------------------


@given(USERS)
@example([("k", None, b"")])
@example([("ключ", "340282366920938463463374607431768211455", b"\x00" * 10), ("k", None, b"x"), ("🔑", "0", b"")])
@example(MANY_KEYS)
def test_one_aggregate_reads_as_aws_kinesis_agg_reads_it(users: list[User]) -> None:
    raw = page(build(users))
    result = deaggregate(raw)
    assert_agrees_with_reference(raw, result)
    assert [(k, h, d) for k, h, d, *_ in rows(result.page)] == users
    assert result.page.sub_sequence_numbers == list(range(len(users)))
    assert set(result.page.sequence_numbers) == {raw.sequence_numbers[0]}
    assert (result.aggregates, result.malformed) == (1, 0)


@given(st.lists(st.one_of(PLAIN, USERS), min_size=1, max_size=8))
@example([b"plain", [("a", None, b"1"), ("b", "17", b"2")], b"", [("c", None, b"3")]])
def test_a_page_mixing_plain_records_and_aggregates_reads_as_aws_kinesis_agg_reads_it(items: list[Any]) -> None:
    raw = page(*(item if isinstance(item, bytes) else build(item) for item in items))
    result = deaggregate(raw)
    assert_agrees_with_reference(raw, result)
    expected: list[tuple[Any, ...]] = []
    for i, item in enumerate(items):
        if isinstance(item, bytes):  # a plain record: its own key, sub-sequence 0, no explicit hash key
            expected.append((raw.partition_keys[i], None, item, raw.sequence_numbers[i], 0))
        else:
            expected += [(k, h, d, raw.sequence_numbers[i], sub) for sub, (k, h, d) in enumerate(item)]
    assert [r[:5] for r in rows(result.page)] == expected
    aggregates = sum(not isinstance(item, bytes) for item in items)
    assert (result.aggregates, result.malformed) == (aggregates, 0)
    if aggregates:
        assert result.page.sub_sequence_numbers is not None and result.page.explicit_hash_keys is not None
    else:
        assert result.page is raw
    assert (result.page.next_iterator, result.page.millis_behind_latest, result.page.child_shards) == (
        raw.next_iterator, raw.millis_behind_latest, raw.child_shards)


TAG = st.tuples(st.text(max_size=5), st.one_of(st.none(), st.text(max_size=5)))


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """AggregatedRecords aws_kinesis_agg's aggregator never writes: unused and repeated table
    entries, tags, explicit hash key indexes on some records only."""
    message = messages_pb2.AggregatedRecord()
    pks = draw(st.lists(st.text(max_size=8), min_size=1, max_size=6))
    ehks = draw(st.lists(HASH_KEY, max_size=4))
    message.partition_key_table.extend(pks)
    message.explicit_hash_key_table.extend(ehks)
    for _ in range(draw(st.integers(0, 6))):
        record = message.records.add()
        record.partition_key_index = draw(st.integers(0, len(pks) - 1))
        if ehks and draw(st.booleans()):
            record.explicit_hash_key_index = draw(st.integers(0, len(ehks) - 1))
        record.data = draw(st.binary(max_size=200))
        for key, value in draw(st.lists(TAG, max_size=2)):
            tag = record.tags.add()
            tag.key = key
            if value is not None:
                tag.value = value
    return message.SerializeToString()


def expected_of(body: bytes) -> list[tuple[str, str | None, bytes]]:
    message = messages_pb2.AggregatedRecord()
    message.ParseFromString(body)
    return [
        (
            message.partition_key_table[r.partition_key_index],
            message.explicit_hash_key_table[r.explicit_hash_key_index] if r.HasField("explicit_hash_key_index") else None,
            r.data,
        )
        for r in message.records
    ]


@given(messages())
def test_messages_with_tags_and_sparse_hash_keys_read_as_protobuf_reads_them(body: bytes) -> None:
    raw = page(b"plain", framed(body))
    result = deaggregate(raw)
    expected = expected_of(body)
    assert [(k, h, d) for k, h, d, *_ in rows(result.page)][1:] == expected
    assert result.page.sub_sequence_numbers == [0, *range(len(expected))]
    assert (result.aggregates, result.malformed) == (1, 0)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + (_varint(len(payload)) + payload if wire == 2 else payload)


RECORD = _field(1, 0, b"\x00") + _field(3, 2, b"hello")
HAND_WRITTEN = {
    "records before the key table": _field(3, 2, RECORD) + _field(1, 2, b"k"),
    "unknown fields of every wire type": (
        _field(9, 0, _varint(2**63)) + _field(10, 1, b"12345678") + _field(11, 2, b"xyz") + _field(12, 5, b"1234")
        + _field(1, 2, b"k") + _field(3, 2, _field(15, 5, b"abcd") + RECORD + _field(16, 2, b""))
    ),
    "an unknown group, nested": _varint(13 << 3 | 3) + _field(1, 0, b"\x01") + _varint(14 << 3 | 3)
    + _varint(14 << 3 | 4) + _varint(13 << 3 | 4) + _field(1, 2, b"k") + _field(3, 2, RECORD),
    "a known field number with another wire type is unknown": _field(1, 2, b"k") + _field(2, 0, b"\x05")
    + _field(3, 2, RECORD + _field(1, 2, b"x")),
    "non-canonical varints (tags, lengths, indexes)": _field(1, 2, b"k") + b"\x9a\x00" + b"\x8b\x80\x00"
    + b"\x08\x80\x00" + b"\x1a\x85\x00hello",
    "repeated scalar fields: the last wins": _field(1, 2, b"a") + _field(1, 2, b"b")
    + _field(3, 2, _field(1, 0, b"\x00") + _field(3, 2, b"first") + _field(1, 0, b"\x01") + _field(3, 2, b"last")),
    "a large field number": _field(1, 2, b"k") + _field((1 << 29) - 1, 0, b"\x01") + _field(3, 2, RECORD),
    "a key that is not UTF-8": _field(1, 2, b"k\xff") + _field(3, 2, RECORD),
}


@pytest.mark.parametrize("body", HAND_WRITTEN.values(), ids=HAND_WRITTEN.keys())
def test_hand_written_protobuf_reads_as_aws_kinesis_agg_reads_it(body: bytes) -> None:
    raw = page(framed(body))
    result = deaggregate(raw)
    assert (result.aggregates, result.malformed) == (1, 0)
    assert_agrees_with_reference(raw, result)


MUTATION = st.tuples(st.sampled_from(["replace", "delete", "insert"]), st.integers(0, 10_000), st.integers(0, 255))


@given(USERS, st.lists(MUTATION, min_size=1, max_size=3))
@example([("a", "1", b"x"), ("b", None, b"y")], [("replace", 3, 0x7F)])  # the first table entry's length
@example([("a", None, b"x")], [("replace", 5, 0x0F)])  # the record's pk index: out of range
@example([("a", None, b"x")], [("delete", 4, 0)])  # a required field gone
@example([("a", None, b"x")], [("replace", 0, 0x0C)])  # an end-group tag without its group
@example([("00\x80", "100", b"\x00\x00")], [("replace", 390, 1)])  # explicit hash key index 1: the reference fails
def test_damaged_protobuf_with_a_good_digest_is_read_as_aws_kinesis_agg_reads_it_or_passed_through(
    users: list[User], mutations: list[tuple[str, int, int]]
) -> None:
    body = bytearray(build(users)[4:-16])
    for kind, where, value in mutations:
        where %= len(body) + 1
        if kind == "insert":
            body[where:where] = bytes([value])
        elif where < len(body):
            if kind == "replace":
                body[where] = value
            else:
                del body[where]
    raw = page(framed(bytes(body)))
    result = deaggregate(raw)
    if result.malformed:  # one raw row; the reference too, but for the differences in docs/consumer.md, "KPL aggregates"
        assert rows(result.page) == [(raw.partition_keys[0], None, raw.data[0], raw.sequence_numbers[0], 0,
                                      raw.arrival_epoch[0], raw.encryption_types[0])]
        try:
            ref = reference(raw)
        except IndexError:  # the reference's own error report fails on an explicit hash key index out of range
            ref = []
        if len(ref) == 1 and ref[0][2] == raw.data[0] and ref[0][0] == raw.partition_keys[0]:
            return
        with pytest.raises(MalformedAggregateError, match="index .* is outside|required"):
            deaggregate(raw, strict=True)
    else:
        assert result.aggregates == 1
        assert_agrees_with_reference(raw, result)


# -- malformed aggregates --------------------------------------------------------------------------

SECRET_KEY, SECRET = "secret-key", b"secret-payload"


def _good() -> bytes:
    return build([(SECRET_KEY, None, SECRET), ("b", "7", b"2")])


MALFORMED = {
    "bad MD5": (lambda: _good()[:-1] + bytes([_good()[-1] ^ 1]), "MD5 digest does not match"),
    "truncated protobuf": (lambda: framed(_good()[4:-16][:-3]), "not valid protobuf"),
    "length past the end": (lambda: framed(_field(1, 2, b"k") + b"\x1a\x7f" + RECORD), "not valid protobuf"),
    "partition key index out of range": (
        lambda: framed(_field(1, 2, SECRET_KEY.encode()) + _field(3, 2, _field(1, 0, b"\x05") + _field(3, 2, SECRET))),
        "partition key index 5 is outside the table of 1",
    ),
    "explicit hash key index out of range": (
        lambda: framed(_field(1, 2, b"k") + _field(3, 2, RECORD + _field(2, 0, b"\x02"))),
        "explicit hash key index 2 is outside the table of 0",
    ),
    "data missing": (lambda: framed(_field(1, 2, b"k") + _field(3, 2, _field(1, 0, b"\x00"))),
                     "a required field is missing: records[0].data"),
    "tag without its key": (lambda: framed(_field(1, 2, b"k") + _field(3, 2, RECORD + _field(4, 2, b""))),
                            "a required field is missing: records[0].tags[0].key"),
    "invalid wire type": (lambda: framed(_field(1, 2, b"k") + b"\x0f" + _field(3, 2, RECORD)), "not valid protobuf"),
    "field number 0": (lambda: framed(b"\x00\x00" + _field(3, 2, RECORD)), "not valid protobuf"),
    "just the magic": (lambda: AGGREGATE_MAGIC, "4 bytes is shorter than the magic and the MD5 digest"),
    "19 bytes": (lambda: AGGREGATE_MAGIC + hashlib.md5(b"").digest()[:15], "shorter"),
    "magic and the digest of nothing": (lambda: framed(b""), "no protobuf between the magic and the MD5 digest"),
}


@pytest.mark.parametrize("make, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_aggregate_passes_through_whole_with_a_warning_and_a_count(make, problem, caplog) -> None:
    bad = make()
    raw = page(b"before", bad, build([("after", None, b"3")]))
    with caplog.at_level(logging.WARNING, logger="kinesis_src.retrieval.aggregation"):
        result = deaggregate(raw, shard_id="shardId-000000000007", stream="orders")
    assert (result.aggregates, result.malformed) == (1, 1)
    assert rows(result.page) == [
        ("p0", None, b"before", "49000000", 0, raw.arrival_epoch[0], None),
        ("p1", None, bad, "49000001", 0, raw.arrival_epoch[1], "KMS"),
        ("after", None, b"3", "49000002", 0, raw.arrival_epoch[2], None),
    ]
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    for named in ("49000001", "shardId-000000000007", "orders", problem):
        assert named in text
    for secret in (SECRET_KEY, "secret", repr(bad)[2:20], base64.b64encode(bad).decode()[:12]):
        assert secret not in caplog.text


@pytest.mark.parametrize("make, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_aggregate_fails_a_strict_read_naming_where_and_how_to_turn_strict_off(make, problem) -> None:
    bad = make()
    with pytest.raises(MalformedAggregateError) as caught:
        deaggregate(page(b"before", bad), strict=True, shard_id="shardId-000000000007", stream="orders")
    text = str(caught.value)
    for named in ("49000001", "shardId-000000000007", "'orders'", problem, "strictAggregation=false",
                  "strict_aggregation=False"):
        assert named in text
    assert "secret" not in text and caught.value.__cause__ is None and caught.value.__context__ is None


def test_strict_reads_of_good_pages_do_not_fail() -> None:
    raw = page(b"plain", _good())
    assert rows(deaggregate(raw, strict=True).page) == rows(deaggregate(raw).page)


# -- empty aggregates, plain pages -------------------------------------------------------------


def test_an_aggregate_without_user_records_yields_no_rows_as_in_the_kcl() -> None:
    empty = framed(_field(1, 2, b"k") + _field(2, 2, b"1"))  # key tables, no records
    result = deaggregate(page(b"before", empty, b"after"))
    assert result.page.data == [b"before", b"after"] and result.page.sequence_numbers == ["49000000", "49000002"]
    assert (result.aggregates, result.malformed) == (1, 0)
    only = deaggregate(page(empty))
    assert len(only.page) == 0 and only.page.next_iterator == "next-iterator" and only.aggregates == 1
    assert reference(page(b"before", empty, b"after")) == rows(result.page)


def test_magic_and_the_digest_of_an_empty_protobuf_is_passed_through_as_the_kcl_does() -> None:
    raw = page(framed(b""))
    assert reference(raw) == rows(deaggregate(raw).page)  # aws_kinesis_agg (like the KCL) keeps it whole
    assert deaggregate(raw).malformed == 1


@pytest.mark.parametrize(
    "datas",
    [
        [b"a", b"", AGGREGATE_MAGIC[:3], b"\xf3\x89\x9a", b"x" + AGGREGATE_MAGIC],
        [bytes(200)] * 10_000,
        [],
    ],
    ids=["near misses", "10,000 records", "empty page"],
)
def test_a_page_without_aggregates_is_returned_as_the_same_object(datas: list[bytes]) -> None:
    raw = page(*datas)
    result = deaggregate(raw, strict=True)
    assert result.page is raw and (result.aggregates, result.malformed) == (0, 0)
    assert raw.sub_sequence_numbers is None and raw.explicit_hash_keys is None


def test_user_records_come_out_as_records_with_their_sub_sequence_numbers_and_hash_keys() -> None:
    raw = page(b"plain", build([("a", None, b"1"), ("b", "99", b"2")]))
    records = list(deaggregate(raw).page.records("shardId-000000000001"))
    assert [(r.partition_key, r.data, r.sequence_number, r.sub_sequence_number, r.explicit_hash_key)
            for r in records] == [
        ("p0", b"plain", "49000000", 0, None),
        ("a", b"1", "49000001", 0, None),
        ("b", b"2", "49000001", 1, "99"),
    ]
    assert records[1].approximate_arrival_timestamp == records[2].approximate_arrival_timestamp


def test_the_largest_explicit_hash_key_index_reads_as_none_and_a_smaller_one_outside_the_table_is_malformed() -> None:
    """An absent index is read as its declared default, 2^64 - 1 (one C pass finds the records with one):
    a record that writes that very index is read as having none; any other index past the table is malformed."""
    largest = _field(1, 2, b"k") + _field(3, 2, RECORD + _field(2, 0, _varint(2**64 - 1)))
    result = deaggregate(page(framed(largest)))
    assert (result.aggregates, result.malformed) == (1, 0)
    assert rows(result.page)[0][:3] == ("k", None, b"hello")
    smaller = _field(1, 2, b"k") + _field(3, 2, RECORD + _field(2, 0, _varint(2**64 - 2)))
    with pytest.raises(MalformedAggregateError, match=f"explicit hash key index {2**64 - 2} is outside the table of 0"):
        deaggregate(page(framed(smaller)), strict=True)
