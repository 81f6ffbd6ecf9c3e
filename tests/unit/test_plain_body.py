"""Kinesis's own GetRecords layout, cut from the quote positions (kinesis_src/aws/plain_body.py).

Whatever the field order or outer fields a service writes, the cut must
give what the reference decoder gives, and any body it does not recognise
(mutated, unusual escapes) must end as the reference's page or error. Both
readers of the cut are held to it: Spark tasks' ``decode_get_records_arrow``
and ``decode_page``, which every other GetRecords page takes (the Consumer's).
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.arrow import ArrowPage
from kinesis_src.aws import decode
from kinesis_src.aws.arrow_decode import decode_get_records_arrow
from kinesis_src.aws.decode import decode_get_records, decode_page
from kinesis_src.records import RecordPage
from tests.arrow_pages import assert_same, every_body_size, outcome, page_fields  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("every_body_size", "every_page_cut")

CUT_DECODERS = [pytest.param(decode_get_records_arrow, id="spark"), pytest.param(decode_page, id="consumer")]
"""The two decoders that try the cut first: Spark tasks', and the one every other GetRecords page takes."""


@pytest.fixture
def every_page_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small bodies normally take the reference decoder in ``decode_page`` too; with this every body tries the cut."""
    monkeypatch.setattr(decode, "PLAIN_CUT_FROM", 0)


def assert_same_page(body: bytes) -> RecordPage:
    """Both cut decoders give the reference's page (and Spark's path the same Arrow batch); ``decode_page``'s."""
    assert_same(body)
    page = decode_page(body)
    assert page_fields(page) == page_fields(decode_get_records(body))
    return page


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
    page = assert_same_page(body)
    plain = all(pk == json.dumps(pk, ensure_ascii=False)[1:-1] for *_, pk in records)
    assert takes_the_cut(body) == plain  # keys needing escapes or control characters take pyarrow.json
    assert isinstance(page, ArrowPage) == plain  # ... and the reference in decode_page


_MUTATION_BYTES = st.sampled_from([b'"', b",", b"{", b"}", b"[", b"]", b":", b"=", b" ", b"A", b"\\", b"1",
                                   b".", b"e", b"-", b'"Data":"', b'"Records":[', b"\xff", b"\x01", b"null",
                                   b'"SequenceNumber":"1",', b'"EncryptionType":"KMS",', b"}]", b"},{"])


@pytest.mark.parametrize("decoder", CUT_DECODERS)
@settings(max_examples=500, deadline=None)
@given(records=kinesis_records, outer=outer_fields, order=field_orders, encryption=encryptions,
       at=st.floats(0, 1), cut=st.integers(0, 6), insert=st.lists(_MUTATION_BYTES, max_size=2))
def test_a_mutated_kinesis_body_gives_the_reference_outcome(
    decoder, records: list, outer: tuple[bytes, bytes], order: tuple[str, ...], encryption: str | None,
    at: float, cut: int, insert: list[bytes],
) -> None:
    """Any change to the layout (a byte gone, a byte added) gives the reference's page or error."""
    body = kinesis_body(records, *outer, order=order, encryption=encryption)
    i = int(at * len(body))
    mutated = body[:i] + b"".join(insert) + body[i + cut :]
    assert outcome(decoder, mutated) == outcome(decode_get_records, mutated)


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
    assert outcome(decode_page, body) == outcome(decode_get_records, body)


# -- the Consumer's pages: decode_page (the cut, else the reference) --------------------------------------------


_CHILDREN = (b',"ChildShards":[{"ShardId":"shardId-000000000001","ParentShards":["shardId-000000000000"],'
             b'"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]')
_ONE = [("49590000000000000000000000000000000000000000000000000001", "1700000000.123", b"\x00\xffdata", "k-1"),
        ("49590000000000000000000000000000000000000000000000000002", "1700000000.5", b"", "k-2")]


@pytest.mark.parametrize(
    ("body", "cut"),
    [
        pytest.param(kinesis_body(_ONE, tail=b',"NextShardIterator":"AAAA","MillisBehindLatest":0'), True, id="plain"),
        pytest.param(kinesis_body(_ONE, KINESIS_MOCK_HEAD), True, id="ChildShards null"),
        pytest.param(kinesis_body(_ONE, tail=b',"ChildShards":[],"NextShardIterator":"i"'), True, id="ChildShards []"),
        pytest.param(kinesis_body(_ONE, order=KINESALITE_ORDER, encryption="KMS"), True, id="kinesalite order, KMS"),
        pytest.param(kinesis_body([(s, t, d, "ключ-🔑-日本") for s, t, d, _ in _ONE]), True, id="non-ASCII keys"),
        pytest.param(kinesis_body(_ONE).replace(b'"k-1"', b'"k-\\u00e9"'), False, id="unicode escape in a key"),
        pytest.param(kinesis_body(_ONE).replace(b'"k-2"', b'"k\\"2"'), False, id="escaped quote in a key"),
        pytest.param(b'{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0}', False, id="empty page"),
        pytest.param(b'{"Records":[],"MillisBehindLatest":0' + _CHILDREN + b"}", False, id="shard end, no records"),
        pytest.param(kinesis_body(_ONE, tail=b',"MillisBehindLatest":0' + _CHILDREN), False, id="shard end, records"),
        pytest.param(kinesis_body(_ONE).replace(b',"Data"', b', "Data"', 1), False, id="whitespace in one record"),
        pytest.param(kinesis_body(_ONE).replace(b'"k-2"', b'"k-2","EncryptionType":"KMS"'), False,
                     id="a field only the last record has"),
    ],
)
def test_consumer_pages_of_every_shape_are_the_reference_pages(body: bytes, cut: bool) -> None:
    page = assert_same_page(body)
    assert isinstance(page, ArrowPage) == cut
    assert page.records("shardId-000000000000", "orders") == decode_get_records(body).records(
        "shardId-000000000000", "orders")
    if cut:  # the columns came with the page: batch.to_arrow() does not build them again
        assert page.own_columns() is not None


def test_kpl_aggregates_in_a_cut_page_deaggregate_as_in_the_reference() -> None:
    from kinesis_src.retrieval.aggregation import deaggregate
    from tests.kpl import aggregate

    blob = aggregate([("user-1", None, b"one"), ("user-2", "12345", b"two"), ("ключ", None, b"\x00three")])
    body = kinesis_body([_ONE[0], (_ONE[1][0], _ONE[1][1], blob, "agg-key")])
    page = assert_same_page(body)
    assert isinstance(page, ArrowPage)
    ours, reference = deaggregate(page), deaggregate(decode_get_records(body))
    assert (ours.aggregates, ours.malformed) == (reference.aggregates, reference.malformed) == (1, 0)
    assert page_fields(ours.page) == page_fields(reference.page)


def test_small_bodies_take_the_reference_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    body = kinesis_body(_ONE)
    monkeypatch.setattr(decode, "PLAIN_CUT_FROM", len(body) + 1)
    assert type(decode_page(body)) is RecordPage
    monkeypatch.setattr(decode, "PLAIN_CUT_FROM", len(body))
    assert isinstance(decode_page(body), ArrowPage)


def test_without_numpy_every_page_takes_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy is only in the spark extra: without it the cut's module is never imported and pages decode as before."""
    import sys

    for name in ("kinesis_src.aws.plain_body", "kinesis_src.aws.vector_base64", "kinesis_src.aws.record_layout"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    decode.plain_cut.cache_clear()
    try:
        assert decode.plain_cut() is None
        body = kinesis_body(_ONE)
        page = decode_page(body)
        assert type(page) is RecordPage
        assert page_fields(page) == page_fields(decode_get_records(body))
    finally:
        decode.plain_cut.cache_clear()


def test_the_parser_hook_cuts_get_records_bodies_as_botocore_parses_them() -> None:
    """What both clients' parsers (botocore's and aiobotocore's hook) return for a plain body: the cut page,
    in the same dict botocore's own parser returns."""
    import botocore.session
    from botocore import parsers

    from kinesis_src.aws.decode import PAGE_KEY, FastGetRecordsParser, page_as_botocore

    shape = botocore.session.get_session().get_service_model("kinesis").operation_model("GetRecords").output_shape
    body = kinesis_body(_ONE, tail=b',"NextShardIterator":"AAAA","MillisBehindLatest":7')
    response = {"body": body, "headers": {}, "status_code": 200}
    ours = FastGetRecordsParser().parse(dict(response), shape)
    theirs = parsers.create_parser("json").parse(dict(response), shape)
    assert isinstance(ours[PAGE_KEY], ArrowPage)
    assert (ours["NextShardIterator"], ours["MillisBehindLatest"]) == ("AAAA", 7)
    theirs.pop("ResponseMetadata")
    assert page_as_botocore(ours[PAGE_KEY]) == theirs


def test_a_polling_reader_imports_the_cutter_as_it_is_made() -> None:
    """numpy and pyarrow.compute take ~0.3 s to import: a reader pays that as it starts, not on its first page."""
    from kinesis_src.positions import Position
    from kinesis_src.retrieval.async_polling import ShardFetcher
    from kinesis_src.retrieval.pacing import FetchPacing

    async def nothing(page: RecordPage) -> None:
        raise AssertionError("nothing is read here")

    decode.plain_cut.cache_clear()
    try:
        ShardFetcher(None, "orders", "shardId-000000000000", Position.trim_horizon(), limit=10_000,  # type: ignore[arg-type]
                     pacing=FetchPacing(), deliver=nothing, on_end=nothing)
        assert decode.plain_cut.cache_info().currsize == 1
        assert decode.plain_cut() is not None
    finally:
        decode.plain_cut.cache_clear()
