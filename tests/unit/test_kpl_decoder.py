"""The hand-written KPL decoder against the reference one (aws_kinesis_agg), on the same aggregates."""

from __future__ import annotations

import logging

import pytest
from aws_kinesis_agg import deaggregator
from aws_kinesis_agg.aggregator import RecordAggregator
from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_src.errors import MalformedAggregateError
from kinesis_src.records import RecordPage
from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC, deaggregate

HASH_KEY = st.integers(min_value=0, max_value=2**128 - 1).map(str)
USER = st.tuples(st.text(min_size=1, max_size=20), st.one_of(st.none(), HASH_KEY), st.binary(max_size=64))


def build(users: list[tuple[str, str | None, bytes]]) -> bytes:
    agg = RecordAggregator()
    for key, hash_key, data in users:
        agg.add_user_record(key, data, hash_key)
    record = agg.clear_and_get()
    assert record is not None
    return record.get_contents()[2]


def page(*datas: bytes) -> RecordPage:
    n = len(datas)
    return RecordPage(
        partition_keys=[f"p{i}" for i in range(n)],
        data=list(datas),
        sequence_numbers=[f"{i + 1:05d}" for i in range(n)],
        arrival_epoch=[1000.0 + i for i in range(n)],
        encryption_types=[None] * n,
        next_iterator="next",
        millis_behind_latest=0,
    )


def reference(data: bytes) -> list[tuple[str, str | None, bytes]]:
    """aws_kinesis_agg's reading of one aggregate, in its Lambda event format."""
    import base64

    event = {"kinesis": {"data": base64.b64encode(data).decode(), "partitionKey": "p", "sequenceNumber": "1",
                         "approximateArrivalTimestamp": 1.0, "kinesisSchemaVersion": "1.0"}}
    out = []
    for record in deaggregator.deaggregate_records([event]):
        k = record["kinesis"]
        out.append((k["partitionKey"], k.get("explicitHashKey"), base64.b64decode(k["data"])))
    return out


@given(st.lists(USER, min_size=1, max_size=30))
@example([("k", None, b"")])
@example([("ключ", "340282366920938463463374607431768211455", b"\x00" * 10), ("k", None, b"x")])
def test_the_hand_written_decoder_agrees_with_aws_kinesis_agg(users) -> None:
    data = build(users)
    ours = deaggregate(page(data)).page
    got = list(zip(ours.partition_keys, ours.explicit_hash_keys or [None] * len(ours), ours.data))
    ref = reference(data)
    # aws_kinesis_agg fills in a hash key computed from the partition key where none was given
    assert [(k, d) for k, _, d in got] == [(k, d) for k, _, d in ref] == [(k, d) for k, _, d in users]
    assert [h for _, h, _ in got] == [h for _, h, _ in users]
    assert ours.sub_sequence_numbers == list(range(len(users)))


def test_plain_pages_are_returned_as_the_same_object() -> None:
    plain = page(b"a", b"b", AGGREGATE_MAGIC[:3])
    result = deaggregate(plain)
    assert result.page is plain and result.aggregates == 0 and result.malformed == 0


def test_plain_and_aggregated_records_mix_on_one_page() -> None:
    result = deaggregate(page(b"plain", build([("a", None, b"1"), ("b", None, b"2")])))
    assert result.page.data == [b"plain", b"1", b"2"] and result.page.sub_sequence_numbers == [0, 0, 1]
    assert result.page.sequence_numbers == ["00001", "00002", "00002"] and result.aggregates == 1


@pytest.mark.parametrize(
    "mangle, problem",
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "MD5"),
        (lambda d: AGGREGATE_MAGIC, "shorter"),
        (lambda d: _with_digest(d[4:-16][:-3]), "truncated"),
        (lambda d: _with_digest(b"\x1a\x05\x08\x05\x1a\x01x"), "partition key index 5"),
    ],
)
def test_malformed_aggregates_pass_through_whole_with_a_warning_or_fail_when_strict(mangle, problem, caplog) -> None:
    bad = mangle(build([("a", None, b"secret-payload"), ("b", None, b"2")]))
    with caplog.at_level(logging.WARNING):
        result = deaggregate(page(bad), shard_id="shardId-7", stream="orders")
    assert result.page.data == [bad] and result.malformed == 1 and result.aggregates == 0
    assert problem in caplog.text and "shardId-7" in caplog.text and "secret" not in caplog.text
    with pytest.raises(MalformedAggregateError, match=f"00001 in shard shardId-7.*{problem}.*strictAggregation=false"):
        deaggregate(page(bad), strict=True, shard_id="shardId-7", stream="orders")


def _with_digest(body: bytes) -> bytes:
    import hashlib

    return AGGREGATE_MAGIC + body + hashlib.md5(body).digest()
