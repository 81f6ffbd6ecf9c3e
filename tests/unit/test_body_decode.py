"""The one GetRecords / SubscribeToShard decode (kinesis_src/aws/body_decode.py) held to the oracle.

The oracle (tests/decode_oracle.py) reads the documented shape with ``json``
and ``binascii``; on random bodies (any field order, nulls, missing optional
fields, unicode and escapes, whitespace, ChildShards shapes), mutated ones
and odd ones, the decode gives the oracle's page, or refuses what the oracle
refuses with an error that names a field and shows nothing of the body.
"""

from __future__ import annotations

import base64
import json
import re
import traceback
from dataclasses import fields
from typing import Any, Callable

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kinesis_src.aws.body_decode import decode_get_records, decode_subscribe_event
from kinesis_src.errors import MalformedResponseError
from kinesis_src.records import RecordPage
from tests.decode_oracle import DuplicateKey, Refused, oracle_page

CANARY = "CANARY-s3cret"
_NAMED = re.compile(r"does not have the documented shape: ('[A-Za-z0-9.\[\]]+' |top level |not JSON \()")


def page_fields(page: RecordPage) -> dict[str, Any]:
    return {f.name: getattr(page, f.name) for f in fields(RecordPage)}


def outcome(decode: Callable[[bytes], RecordPage], body: bytes) -> tuple[str, Any]:
    """("page", its fields) or ("refused", None); a refusal must name a field and show no record content."""
    try:
        return "page", page_fields(decode(body))
    except MalformedResponseError as exc:
        rendered = "".join(traceback.format_exception(exc))
        assert _NAMED.search(str(exc)), str(exc)
        assert CANARY not in rendered and base64.b64encode(CANARY.encode()).decode() not in rendered
        return "refused", None
    except (Refused, DuplicateKey):
        return "refused", None


def oracle(body: bytes) -> RecordPage:
    return oracle_page(body)


def assert_like_the_oracle(body: bytes) -> tuple[str, Any]:
    try:
        oracle_page(body)
    except DuplicateKey:
        assume(False)  # JSON leaves a repeated key's meaning open; pinned separately below
    except Refused:
        pass
    expected = outcome(oracle, body)
    assert outcome(decode_get_records, body) == expected
    return expected


# -- random bodies of the documented shape ---------------------------------------------------------------

_KEYS = st.text(max_size=12) | st.sampled_from(["", CANARY, "ключ-🔑", "日本語", 'quo"te\\', "\x00\x1f\u2028"])
_STAMPS = st.floats(0, 4e9, allow_nan=False) | st.integers(0, 4_000_000_000)
_FIELDS = {
    "SequenceNumber": st.integers(0, 10**56).map(str),
    "Data": st.binary(max_size=48).map(lambda b: base64.b64encode(b).decode()),
    "PartitionKey": st.none() | _KEYS,
    "ApproximateArrivalTimestamp": st.none() | _STAMPS,
    "EncryptionType": st.none() | st.sampled_from(["KMS", "NONE"]),
}
_OPTIONAL = ("PartitionKey", "ApproximateArrivalTimestamp", "EncryptionType")


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    present = ["SequenceNumber", "Data"] + [f for f in _OPTIONAL if draw(st.booleans())]
    order = draw(st.permutations(present))
    out = {name: draw(_FIELDS[name]) for name in order}
    if draw(st.booleans()):
        out["Extra"] = draw(st.sampled_from([1, None, [1, {"a": "b"}], "x"]))
    return out


_HASH = st.integers(0, 2**128 - 1)
children = st.lists(
    st.fixed_dictionaries(
        {"ShardId": st.sampled_from(["shardId-000000000002", "shardId-000000000003"]),
         "HashKeyRange": st.tuples(_HASH, _HASH, st.booleans()).map(
             lambda t: {"StartingHashKey": str(t[0]) if t[2] else t[0], "EndingHashKey": str(t[1])})},
        optional={"ParentShards": st.none() | st.lists(st.sampled_from(["shardId-000000000000", "shardId-1"]),
                                                        max_size=2)},
    ),
    max_size=2,
)


@st.composite
def documents(draw: st.DrawFn, next_key: str = "NextShardIterator") -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in [
        ("Records", st.none() | st.lists(records(), max_size=12)),
        (next_key, st.none() | st.text(max_size=8)),
        ("MillisBehindLatest", st.none() | st.integers(0, 10**12)),
        ("ChildShards", st.none() | children),
    ]:
        if draw(st.booleans()):
            doc[key] = draw(value)
    keys = draw(st.permutations(list(doc)))
    return {key: doc[key] for key in keys}


def render(doc: dict[str, Any], style: int) -> bytes:
    """Compact as services write it, spaced, indented, or with every non-ASCII character escaped."""
    if style == 0:
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    if style == 1:
        return json.dumps(doc, ensure_ascii=False).encode()
    if style == 2:
        return json.dumps(doc, indent=2, ensure_ascii=False).encode()
    return json.dumps(doc).encode()


@settings(max_examples=300, deadline=None)
@given(doc=documents(), style=st.integers(0, 3))
@example(doc={"Records": [{"SequenceNumber": "1", "Data": "", "PartitionKey": None}]}, style=0)
@example(doc={"ChildShards": None, "MillisBehindLatest": 0, "NextShardIterator": "AAAA+/=",
              "Records": [{"ApproximateArrivalTimestamp": 1795482151.968, "Data": "9fX1", "EncryptionType": "NONE",
                           "PartitionKey": "key-299", "SequenceNumber": "49680506747035814431907663731372646698"}]},
         style=0)  # kinesis-mock's layout: outer fields first, ChildShards null, fields in alphabetical order
def test_documented_bodies_decode_as_the_oracle_reads_them(doc: dict[str, Any], style: int) -> None:
    body = render(doc, style)
    assert assert_like_the_oracle(body)[0] == "page"


@settings(max_examples=150, deadline=None)
@given(doc=documents("ContinuationSequenceNumber"), style=st.integers(0, 3))
def test_subscribe_events_decode_as_the_oracle_reads_them(doc: dict[str, Any], style: int) -> None:
    body = render(doc, style)
    expected = page_fields(oracle_page(body, "ContinuationSequenceNumber"))
    assert page_fields(decode_subscribe_event(body)) == expected


# -- mutated bodies: a byte gone, bytes added -------------------------------------------------------------

_INSERTS = st.sampled_from([b'"', b",", b"{", b"}", b"[", b"]", b":", b"=", b" ", b"A", b"\\", b"1", b".", b"e",
                            b"-", b'"Data":"', b'"Records":[', b"\xff", b"\x01", b"null", b"true", b"1e999",
                            b'"SequenceNumber":"1",', b'"EncryptionType":5,', b"}]", b"},{", b"\\ud800", b"\\u0041"])


@settings(max_examples=600, deadline=None)
@given(doc=documents(), style=st.integers(0, 3), at=st.floats(0, 1), cut=st.integers(0, 6),
       insert=st.lists(_INSERTS, max_size=2))
@example(doc={"Records": [{"SequenceNumber": "1", "Data": "YQ=="}]}, style=0, at=0.7, cut=0, insert=[b"\\u0041"])
def test_a_mutated_body_gives_the_oracle_outcome(
    doc: dict[str, Any], style: int, at: float, cut: int, insert: list[bytes]
) -> None:
    body = render(doc, style)
    i = int(at * len(body))
    assert_like_the_oracle(body[:i] + b"".join(insert) + body[i + cut :])


# -- odd bodies, pinned ---------------------------------------------------------------------------------------

_B64 = base64.b64encode(CANARY.encode()).decode()


def _one(**fields: Any) -> bytes:
    record = {"SequenceNumber": "1", "Data": _B64, "PartitionKey": CANARY, **fields}
    return json.dumps({"Records": [record], "NextShardIterator": "AAAA"}).encode()


PAGES = {
    "Records null": b'{"Records": null, "NextShardIterator": "it"}',
    "no Records": b'{"NextShardIterator": "it"}',
    "escaped slash in base64": b'{"Records":[{"SequenceNumber":"1","Data":"YW\\/v"}]}',
    "escaped padding": b'{"Records":[{"SequenceNumber":"1","Data":"YQ=\\u003d"}]}',
    "escaped unicode key": b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","PartitionKey":"\\u00e9\\ud83d\\udd11"}]}',
    "integer arrival time": b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","ApproximateArrivalTimestamp":17}]}',
    "unknown fields": b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","Extra":{"a":[1,2]}}],"Other":1}',
    "non-zero trailing bits": b'{"Records":[{"SequenceNumber":"1","Data":"YR=="}]}',
    "ChildShards []": b'{"Records":[],"ChildShards":[]}',
    "child of two parents, integer keys": (
        b'{"Records":[],"ChildShards":[{"ShardId":"shardId-3","ParentShards":["shardId-0","shardId-1"],'
        b'"HashKeyRange":{"StartingHashKey":0,"EndingHashKey":"340282366920938463463374607431768211455"}}]}'
    ),
    "huge MillisBehindLatest": b'{"Records":[],"MillisBehindLatest":99999999999999999999999}',
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_odd_but_documented_bodies_are_pages(name: str) -> None:
    assert assert_like_the_oracle(PAGES[name])[0] == "page"


REFUSED = {
    "not JSON": (f"{CANARY} is not json".encode(), "not JSON"),
    "truncated": (_one()[:-20], "not JSON"),
    "not UTF-8": (b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","PartitionKey":"' + CANARY.encode() + b'\xff"}]}',
                  "not JSON"),
    "bad UTF-8 in an ignored field": (b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","X":"\xff"}]}', "not JSON"),
    "lone surrogate": (_one(PartitionKey="\ud800" + CANARY), "not JSON"),
    "two JSON values": (b'{"Records":[]}\n{"Records":[]}', "not JSON"),
    "empty": (b"", "not JSON"),
    "null": (b"null", "top level"),
    "an array": (json.dumps([CANARY]).encode(), "top level"),
    "Records an object": (json.dumps({"Records": {CANARY: 1}}).encode(), "'Records'"),
    "a record is null": (b'{"Records":[null]}', "'Records[0]'"),
    "a record is a string": (json.dumps({"Records": [CANARY]}).encode(), "'Records[0]'"),
    "Data missing": (json.dumps({"Records": [{"SequenceNumber": "1", "PartitionKey": CANARY}]}).encode(),
                     "'Records[0].Data' is missing"),
    "Data null": (_one(Data=None), "'Records[0].Data'"),
    "Data a number": (_one(Data=5), "'Records[0].Data'"),
    "Data an object": (_one(Data={CANARY: 1}), "'Records[0].Data'"),
    "Data not base64": (_one(Data=CANARY + "!"), "'Records[0].Data'"),
    "Data not ASCII": (_one(Data=_B64 + "é"), "'Records[0].Data'"),
    "Data unpadded": (_one(Data="YQ"), "'Records[0].Data'"),
    "Data with a newline": (_one(Data="YWJj\n"), "'Records[0].Data'"),
    "Data with padding inside": (_one(Data="YQ==YQ=="), "'Records[0].Data'"),
    "sequence number missing": (json.dumps({"Records": [{"Data": _B64}]}).encode(), "'Records[0].SequenceNumber'"),
    "sequence number a number": (_one(SequenceNumber=1), "'Records[0].SequenceNumber'"),
    "partition key a number": (_one(PartitionKey=5), "'Records[0].PartitionKey'"),
    "arrival a string": (_one(ApproximateArrivalTimestamp=CANARY), "'Records[0].ApproximateArrivalTimestamp'"),
    "arrival true": (_one(ApproximateArrivalTimestamp=True), "'Records[0].ApproximateArrivalTimestamp'"),
    "arrival out of range": (_one().replace(b'"1"', b'"1","ApproximateArrivalTimestamp":1e999'),
                             "'Records[0].ApproximateArrivalTimestamp'"),
    "arrival NaN": (_one().replace(b'"1"', b'"1","ApproximateArrivalTimestamp":NaN'), "not JSON"),
    "MillisBehindLatest a float": (b'{"Records":[],"MillisBehindLatest":1.0}', "'MillisBehindLatest'"),
    "MillisBehindLatest true": (b'{"Records":[],"MillisBehindLatest":true}', "'MillisBehindLatest'"),
    "NextShardIterator a number": (b'{"Records":[],"NextShardIterator":5}', "'NextShardIterator'"),
    "child hash key not a number": (
        json.dumps({"Records": [], "ChildShards": [{"ShardId": "shardId-1", "ParentShards": [],
                                                    "HashKeyRange": {"StartingHashKey": CANARY, "EndingHashKey": "1"}}]}
                   ).encode(),
        "'ChildShards[0].HashKeyRange.StartingHashKey' is not a decimal integer",
    ),
    "child without a hash range": (b'{"ChildShards":[{"ShardId":"shardId-1"}]}', "'ChildShards[0].HashKeyRange' is missing"),
    "child parent a number": (b'{"ChildShards":[{"ShardId":"s","ParentShards":[1],'
                              b'"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"1"}}]}',
                              "'ChildShards[0].ParentShards[0]'"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_bodies_name_the_field_and_never_show_the_record(name: str) -> None:
    body, named = REFUSED[name]
    assert assert_like_the_oracle(body) == ("refused", None)
    with pytest.raises(MalformedResponseError, match="GetRecords response body") as info:
        decode_get_records(body)
    assert named in str(info.value)
    assert not info.value.retriable


@pytest.mark.parametrize(
    ("body", "sequence_number"),
    [
        (b'{"Records":[{"SequenceNumber":"1","SequenceNumber":"2","Data":"YQ=="}]}', "2"),
        (b'{"Records":[{"SequenceNumber":"1","Data":"YQ=="}],"Records":[{"SequenceNumber":"3","Data":"YQ=="}]}', "3"),
    ],
)
def test_a_repeated_key_keeps_its_last_value_as_json_loads_does(body: bytes, sequence_number: str) -> None:
    assert decode_get_records(body).sequence_numbers == [sequence_number]
    assert json.loads(body)["Records"][0]["SequenceNumber"] == sequence_number


def test_an_event_error_names_the_event() -> None:
    with pytest.raises(MalformedResponseError, match=r"SubscribeToShard event \(\d+ bytes\).*'Records\[0\].Data'"):
        decode_subscribe_event(b'{"Records":[{"SequenceNumber":"1","Data":5}],"ContinuationSequenceNumber":"9"}')
