"""The Arrow decoder for Spark tasks must give what the reference decoder gives, page for page.

The reference is :func:`kinesis_src.aws.decode.decode_get_records` followed by
:func:`kinesis_src.arrow.page_to_arrow` of its lists (what tasks did before).
Both paths run on the same bodies: random pages (empty data, unicode keys,
missing fields, any base64 padding), bodies that must fall back (children,
aggregates, unusual JSON), malformed bodies, and through the cursor (cuts by
sequence number and arrival time, KPL de-aggregation, sub-sequence numbers).
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.arrow import ArrowPage, page_to_arrow
from kinesis_src.aws.arrow_decode import decode_base64, decode_get_records_arrow
from kinesis_src.aws.decode import decode_get_records
from kinesis_src.key_filter import filter_page
from kinesis_src.positions import Position
from kinesis_src.records import RecordPage
from kinesis_src.retrieval.cursor import NO_END, ReadEnd, ShardCursor
from lineage import KeyRange
from tests.arrow_pages import SHARD, assert_same, every_body_size, outcome, page_fields  # noqa: F401  (a fixture)
from tests.kpl import aggregate

pytestmark = pytest.mark.usefixtures("every_body_size")


def record(seq: int, data: bytes, pk: str | None = "k", ts: float | None = 1_700_000_000.5, enc: str | None = None) -> dict:
    out: dict = {"SequenceNumber": str(seq), "Data": base64.b64encode(data).decode()}
    if ts is not None:
        out["ApproximateArrivalTimestamp"] = ts
    if pk is not None:
        out["PartitionKey"] = pk
    if enc is not None:
        out["EncryptionType"] = enc
    return out


def body_of(records: list[dict], ensure_ascii: bool = True, **extra: object) -> bytes:
    return json.dumps({"Records": records, **extra}, ensure_ascii=ensure_ascii).encode()


records_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "data": st.binary(max_size=40),
            "pk": st.none() | st.text(max_size=12),
            "ts": st.none() | st.floats(1e9, 2e9, allow_nan=False) | st.integers(1_000_000_000, 2_000_000_000),
            "enc": st.none() | st.sampled_from(["KMS", "NONE"]),
        }
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    records=records_strategy,
    ascii_only=st.booleans(),
    iterator=st.none() | st.text(min_size=1, max_size=20),
    behind=st.none() | st.integers(0, 10**12),
)
@example(records=[], ascii_only=True, iterator=None, behind=None)
@example(records=[{"data": b"", "pk": "ключ-🔑", "ts": None, "enc": None}], ascii_only=False, iterator="it", behind=0)
@example(records=[{"data": b"ab", "pk": None, "ts": 1.5e9, "enc": "KMS"}] * 3, ascii_only=True, iterator="x", behind=5)
def test_random_pages_decode_the_same(records: list[dict], ascii_only: bool, iterator: str | None, behind: int | None) -> None:
    raw = [record(10**20 + i, r["data"], r["pk"], r["ts"], r["enc"]) for i, r in enumerate(records)]
    extra: dict = {}
    if iterator is not None:
        extra["NextShardIterator"] = iterator
    if behind is not None:
        extra["MillisBehindLatest"] = behind
    page = assert_same(body_of(raw, ensure_ascii=ascii_only, **extra))
    assert isinstance(page, ArrowPage) and page.own_columns() is not None  # the Arrow path did decode it


def test_a_full_page_takes_the_arrow_path_at_the_real_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    big = body_of([record(i, os.urandom(200), f"key-{i}") for i in range(200)], NextShardIterator="it")
    small = body_of([record(1, b"x")], NextShardIterator="it")
    assert isinstance(assert_same(big), ArrowPage)
    assert not isinstance(decode_get_records_arrow(small), ArrowPage)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(body_of([], ChildShards=[{"ShardId": "shardId-1", "ParentShards": ["shardId-0"],
                                               "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}]),
                     id="closed shard with children"),
        pytest.param(b'{"Records": null, "NextShardIterator": "it"}', id="Records null"),
        pytest.param(b'{"NextShardIterator": "it"}', id="no Records"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","SequenceNumber":"2","Data":"YQ=="}]}', id="a field twice"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YW\\/v"}]}', id="escaped slash in base64"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","PartitionKey":"\\u00e9\\ud83d\\udd11"}]}',
                     id="escaped unicode"),
        pytest.param(b'{\n  "Records": [\n    {"SequenceNumber": "1", "Data": "YQ=="}\n  ]\n}', id="pretty-printed"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","ApproximateArrivalTimestamp":17}]}',
                     id="integer arrival time"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","Extra":{"a":[1,2]}}],"Other":1}',
                     id="unknown fields"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","PartitionKey":"\\ud800"}]}',
                     id="lone surrogate"),
        pytest.param(b'{"Records":[{"SequenceNumber":1,"Data":"YQ=="}]}', id="sequence number as a number"),
        pytest.param(b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","ApproximateArrivalTimestamp":NaN}]}',
                     id="NaN arrival"),
    ],
)
def test_unusual_but_valid_bodies_decode_the_same(body: bytes) -> None:
    try:
        assert_same(body)
    except (pa.ArrowException, UnicodeEncodeError) as refused:  # a number for a string, a lone surrogate
        assert page_fields(decode_get_records_arrow(body)) == page_fields(decode_get_records(body))
        with pytest.raises(type(refused)):  # the reference's own conversion refuses it the same way
            page_to_arrow(decode_get_records(body), "orders", SHARD)


MALFORMED = {
    "not JSON": b'{"Records": [',
    "two JSON values": b'{"Records":[]}\n{"Records":[]}',
    "an array": b"[1, 2]",
    "a record is null": b'{"Records":[null]}',
    "a record is a number": b'{"Records":[1]}',
    "Data missing": b'{"Records":[{"SequenceNumber":"1"}]}',
    "Data null": b'{"Records":[{"SequenceNumber":"1","Data":null}]}',
    "Data a number": b'{"Records":[{"SequenceNumber":"1","Data":5}]}',
    "Data not base64": b'{"Records":[{"SequenceNumber":"1","Data":"CANARY-s3cret!"}]}',
    "Data unpadded": b'{"Records":[{"SequenceNumber":"1","Data":"YQ"}]}',
    "sequence number missing": b'{"Records":[{"Data":"YQ=="}]}',
    "bad UTF-8 in an ignored field": b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","X":"\xff"}]}',
    "bad UTF-8 in a key": b'{"Records":[{"SequenceNumber":"1","Data":"YQ==","PartitionKey":"\xff"}]}',
    "empty": b"",
    # pyarrow.json (26.0.1) crashes the process with a segmentation fault on these: they must never reach it
    "null": b"null",
    "null, then an object": b' \nnull{"Records":[]}',
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_bodies_give_the_reference_outcome(name: str) -> None:
    """The same MalformedResponseError text; or, where the reference is lenient (a2b_base64 skips
    characters outside the alphabet), the same page."""
    body = MALFORMED[name]
    expected = outcome(decode_get_records, body)
    assert outcome(decode_get_records_arrow, body) == expected
    assert expected[0] == ("page" if name == "Data not base64" else "error")


@pytest.mark.parametrize(
    "values",
    [
        ["", "YQ==", "YWI=", "YWJj", "YWJjZA==", "////", "+/+/"],
        ["YQ==", "Y===", "YWJj"],  # three '=': not canonical
        ["YQ==", "YQ=a", "YWJj"],  # '=' inside
        ["YQ==", "YWJ", "YWJj"],  # not whole quads
        ["YQ==", "YW J", "YWJj"],  # outside the alphabet
        ["YR==", "YWK="],  # non-zero trailing bits: ignored, as a2b_base64 does
    ],
)
def test_base64_over_one_buffer_decodes_each_value_or_refuses(values: list[str]) -> None:
    import binascii

    try:
        expected = [binascii.a2b_base64(v, strict_mode=True) for v in values]
    except binascii.Error:
        expected = None
    array = pa.array(values, pa.string()).slice(0)
    try:
        got = decode_base64(array).to_pylist()
    except ValueError:  # NotCanonical: the body would take the reference decoder
        got = None
    if expected is None:
        assert got is None
    else:
        assert got == expected == [binascii.a2b_base64(v) for v in values]


def test_a_sliced_array_decodes_only_its_values() -> None:
    array = pa.array(["YQ==", "YWI=", "YWJj", "YWJjZA=="], pa.string()).slice(1, 2)
    assert decode_base64(array).to_pylist() == [b"ab", b"abc"]


# -- through the cursor: cuts, aggregates, filters --------------------------------------------------


def delivered(page: RecordPage, end: ReadEnd = NO_END, start: Position | None = None) -> pa.RecordBatch:
    cursor = ShardCursor("orders", SHARD, start or Position.trim_horizon())
    return page_to_arrow(cursor.accept(page, end).page, "orders", SHARD)


def plain_body(n: int = 30) -> bytes:
    return body_of([record(100 + 10 * i, f"data-{i}".encode(), f"key-{i}", 1_700_000_000 + i) for i in range(n)],
                   NextShardIterator="it", MillisBehindLatest=0)


@pytest.mark.parametrize(
    "end",
    [ReadEnd(), ReadEnd(sequence=150), ReadEnd(timestamp=1_700_000_010.5), ReadEnd(sequence=100, timestamp=1_700_000_020)],
)
def test_cut_pages_give_the_same_rows(end: ReadEnd) -> None:
    body = plain_body()
    assert delivered(decode_get_records_arrow(body), end).equals(delivered(decode_get_records(body), end))


def test_a_page_with_aggregates_is_deaggregated_the_same() -> None:
    users = [(f"user-{i}", None, f"payload-{i}".encode()) for i in range(5)]
    blob = aggregate(users)
    body = body_of([record(100, b"plain", "p"), record(200, blob, "user-0"), record(300, b"after", "q")],
                   NextShardIterator="it")
    ours = delivered(decode_get_records_arrow(body))
    assert ours.equals(delivered(decode_get_records(body)))
    assert ours.column("subSequenceNumber").to_pylist() == [0, 0, 1, 2, 3, 4, 0]
    assert ours.column("data").to_pylist()[1:6] == [u[2] for u in users]


def test_a_read_resumed_inside_an_aggregate_drops_the_same_user_records() -> None:
    blob = aggregate([(f"user-{i}", None, f"payload-{i}".encode()) for i in range(4)])
    body = body_of([record(200, blob, "user-0"), record(300, b"after", "q")], NextShardIterator="it")
    inside = Position.after_sequence("200", 1)
    ours = delivered(decode_get_records_arrow(body), start=inside)
    assert ours.equals(delivered(decode_get_records(body), start=inside))
    assert ours.column("subSequenceNumber").to_pylist() == [2, 3, 0]


def test_stale_columns_are_never_used() -> None:
    """A page made from an Arrow page with other rows (a filter, a slice) is converted from its lists."""
    page = decode_get_records_arrow(plain_body())
    assert isinstance(page, ArrowPage)
    filtered = filter_page(page, KeyRange.slice(0, 2))
    assert 0 < len(filtered) < len(page)
    assert isinstance(filtered, ArrowPage) and filtered.own_columns() is None
    assert page_to_arrow(filtered, "orders", SHARD).column("partitionKey").to_pylist() == filtered.partition_keys
    same_rows = replace(page, next_iterator=None)
    assert same_rows.own_columns() is page.columns
    assert page.slice(5, 2).partition_keys == page_to_arrow(page.slice(5, 2), "o", SHARD).column(0).to_pylist()


def test_a_task_hands_spark_only_the_rows_of_its_key_range() -> None:
    """tasks.page_batch, used by batch and streaming tasks alike: with a key range only its rows, from an
    Arrow page the same as from the reference page; without one every row."""
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition
    from kinesis_src.spark.tasks import page_batch
    from lineage import hash_key_of

    body = plain_body(60)
    endpoint = Endpoint("us-east-1", None, None)
    whole = KinesisPartition(0, "orders", endpoint, ())
    for index in (0, 1):
        key_range = KeyRange.slice(index, 2)
        part = replace(whole, key_range=key_range)
        ours = page_batch(decode_get_records_arrow(body), part, SHARD)
        assert ours is not None and ours.equals(page_batch(decode_get_records(body), part, SHARD))
        keys = ours.column("partitionKey").to_pylist()
        assert 0 < len(keys) < 60 and all(hash_key_of(k) in key_range for k in keys)
    assert page_batch(decode_get_records_arrow(body), whole, SHARD).num_rows == 60
    outside = replace(whole, key_range=KeyRange(0, 0))
    assert page_batch(decode_get_records_arrow(body), outside, SHARD) is None  # no rows: no batch
