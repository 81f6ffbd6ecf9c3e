"""Kinesis's own GetRecords layout, cut from the quote positions (kinesis_src/aws/plain_body.py).

Whatever the field order or outer fields a service writes, the cut must
give what the reference decoder gives, and any body it does not recognise
(mutated, unusual escapes) must end as the reference's page or error.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.aws.arrow_decode import decode_get_records_arrow
from kinesis_src.aws.decode import decode_get_records
from tests.arrow_pages import assert_same, every_body_size, outcome  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("every_body_size")


# -- Kinesis's own layout: cut from the quote positions, no JSON parser (kinesis_src/aws/plain_body.py) -------


KINESIS_ORDER = ("SequenceNumber", "ApproximateArrivalTimestamp", "Data", "PartitionKey")
KINESALITE_ORDER = ("PartitionKey", "Data", "ApproximateArrivalTimestamp", "SequenceNumber")
KINESIS_MOCK_HEAD = b'"ChildShards":null,"MillisBehindLatest":0,"NextShardIterator":"AAAA+/=",'
"""kinesis-mock (the emulator of the integration tests) writes the outer fields before the records,
ChildShards null, and each record's fields in alphabetical order, EncryptionType among them."""


KINESIS_MOCK_ORDER = ("ApproximateArrivalTimestamp", "Data", "EncryptionType", "PartitionKey", "SequenceNumber")


def kinesis_body(
    records: list[tuple[str, str, bytes, str]],
    head: bytes = b"",
    tail: bytes = b"",
    order: tuple[str, ...] = KINESIS_ORDER,
    encryption: str | None = None,
) -> bytes:
    """A body as a service writes it: compact, every record's fields in ``order`` (EncryptionType where
    ``order`` has it, else last, only when ``encryption`` is given); ``head``/``tail`` are outer fields (``"key":value,`` before the records, ``,"key":value``
    after them)."""
    rows = []
    for seq, ts, data, pk in records:
        values = {
            "SequenceNumber": b'"%s"' % seq.encode(),
            "ApproximateArrivalTimestamp": ts.encode(),
            "Data": b'"%s"' % base64.b64encode(data),
            "PartitionKey": json.dumps(pk, ensure_ascii=False).encode(),
            "EncryptionType": json.dumps(encryption).encode(),
        }
        names = tuple(name for name in order if name != "EncryptionType" or encryption is not None)
        if encryption is not None and "EncryptionType" not in order:
            names += ("EncryptionType",)
        rows.append(b"{" + b",".join(b'"%s":%s' % (name.encode(), values[name]) for name in names) + b"}")
    return b"{" + head + b'"Records":[' + b",".join(rows) + b"]" + tail + b"}"


_STAMP_TEXT = st.sampled_from([repr, lambda f: f"{f:.3f}", lambda f: f"{f:.10E}", lambda f: str(int(f)),
                               lambda f: f"{f:.6e}"])
kinesis_records = st.lists(
    st.tuples(
        st.integers(0, 10**40).map(str),
        st.tuples(_STAMP_TEXT, st.floats(1e9, 2e9, allow_nan=False)).map(lambda t: t[0](t[1])),
        st.binary(max_size=40),
        st.text(max_size=12),
    ),
    min_size=1,
    max_size=30,
)
outer_fields = st.sampled_from([
    (b"", b',"NextShardIterator":"AAAA/+=","MillisBehindLatest":0'),
    (b'"MillisBehindLatest":12,', b',"NextShardIterator":"it"'),
    (b'"NextShardIterator":"it","MillisBehindLatest":3,', b""),
    (KINESIS_MOCK_HEAD, b""),
    (b"", b',"ChildShards":[]'),
    (b"", b""),
])


def takes_the_cut(body: bytes) -> bool:
    from kinesis_src.aws.plain_body import NotThisLayout, cut_body

    try:
        cut_body(body)
    except (NotThisLayout, ValueError):
        return False
    return True


field_orders = st.permutations(KINESIS_MOCK_ORDER).map(tuple)
encryptions = st.none() | st.sampled_from(["KMS", "NONE"])


@settings(max_examples=300, deadline=None)
@given(records=kinesis_records, outer=outer_fields, order=field_orders, encryption=encryptions)
@example(records=[("1", "1700000000.123", b"abc", "k")], outer=(b"", b""), order=KINESALITE_ORDER, encryption=None)
@example(records=[("49680506747035814431907663731372646698402767703491215362", "1795482151.968", b"\xf5" * 200,
                    "key-299")] * 3, outer=(KINESIS_MOCK_HEAD, b""), order=KINESIS_MOCK_ORDER, encryption="NONE")
def test_kinesis_layout_is_cut_and_decodes_the_same(
    records: list, outer: tuple[bytes, bytes], order: tuple[str, ...], encryption: str | None
) -> None:
    """Any field order (each service has its own), EncryptionType or not: cut, and the reference's page."""
    body = kinesis_body(records, *outer, order=order, encryption=encryption)
    assert_same(body)
    plain = all(pk == json.dumps(pk, ensure_ascii=False)[1:-1] for *_, pk in records)
    assert takes_the_cut(body) == plain  # keys needing escapes or control characters take pyarrow.json


_MUTATION_BYTES = st.sampled_from([b'"', b",", b"{", b"}", b"[", b"]", b":", b"=", b" ", b"A", b"\\", b"1",
                                   b".", b"e", b"-", b'"Data":"', b'"Records":[', b"\xff", b"\x01", b"null",
                                   b'"SequenceNumber":"1",', b'"EncryptionType":"KMS",', b"}]", b"},{"])


@settings(max_examples=500, deadline=None)
@given(records=kinesis_records, outer=outer_fields, order=field_orders, encryption=encryptions,
       at=st.floats(0, 1), cut=st.integers(0, 6), insert=st.lists(_MUTATION_BYTES, max_size=2))
def test_a_mutated_kinesis_body_gives_the_reference_outcome(
    records: list, outer: tuple[bytes, bytes], order: tuple[str, ...], encryption: str | None,
    at: float, cut: int, insert: list[bytes],
) -> None:
    """Any change to the layout (a byte gone, a byte added) gives the reference's page or error."""
    body = kinesis_body(records, *outer, order=order, encryption=encryption)
    i = int(at * len(body))
    mutated = body[:i] + b"".join(insert) + body[i + cut :]
    assert outcome(decode_get_records_arrow, mutated) == outcome(decode_get_records, mutated)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")], tail=b',"Records":[]'), id="Records twice"),
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")], tail=b',"ChildShards":[{"ShardId":"shardId-1","ParentShards"'
                                  b':["shardId-0"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]'),
                     id="children after the records"),
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")], tail=b',"MillisBehindLatest":1,"MillisBehindLatest":2'),
                     id="outer key twice"),
        pytest.param(kinesis_body([("1", "1e999", b"a", "k")]), id="timestamp out of range"),
        pytest.param(kinesis_body([("1", "01.5", b"a", "k")]), id="timestamp not JSON"),
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")], tail=b',"MillisBehindLatest":true'), id="bool millis"),
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")], tail=b',"NextShardIterator":5'), id="iterator number"),
        pytest.param(kinesis_body([("1", "1.5", b"a", "k")]).replace(b'"Data":"YQ=="', b'"Data":"YQ=\\u003d"'),
                     id="escaped pad"),
    ],
)
def test_kinesis_layout_edge_cases_give_the_reference_outcome(body: bytes) -> None:
    assert not takes_the_cut(body)
    assert outcome(decode_get_records_arrow, body) == outcome(decode_get_records, body)
