"""The fast GetRecords decoder must produce exactly what botocore's parser produces."""

from __future__ import annotations

import base64
import json
import traceback

import botocore.session
import pytest
from botocore import parsers
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_src.aws.decode import (
    PAGE_KEY,
    FastGetRecordsParser,
    FastResponseParserFactory,
    decode_get_records,
)
from kinesis_src.errors import MalformedResponseError, TruncatedResponseError
from tests.decode_oracle import page_as_botocore

_MODEL = botocore.session.get_session().get_service_model("kinesis")
_OUTPUT = _MODEL.operation_model("GetRecords").output_shape


def _botocore_parse(body: bytes) -> dict:
    parsed = parsers.create_parser("json").parse({"body": body, "headers": {}, "status_code": 200}, _OUTPUT)
    parsed.pop("ResponseMetadata", None)
    return parsed


def _body(records: list[dict], **extra: object) -> bytes:
    return json.dumps({"Records": records, **extra}).encode()


def _record(seq: int, pk: str, data: bytes, ts: float | None = 1_700_000_000.123, enc: str | None = None) -> dict:
    out: dict = {"SequenceNumber": str(seq), "Data": base64.b64encode(data).decode(), "PartitionKey": pk}
    if ts is not None:
        out["ApproximateArrivalTimestamp"] = ts
    if enc is not None:
        out["EncryptionType"] = enc
    return out


CASES = {
    "unicode keys and empty data": _body(
        [
            _record(1, "ключ-🔑", b""),
            _record(2, "日本語", "données".encode()),
            _record(3, "", b"\x00\xff" * 10, enc="KMS"),
        ],
        NextShardIterator="AAAA",
        MillisBehindLatest=0,
    ),
    "closed shard with children": _body(
        [],
        MillisBehindLatest=12,
        ChildShards=[
            {
                "ShardId": "shardId-000000000002",
                "ParentShards": ["shardId-000000000000"],
                "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "100"},
            },
            {
                "ShardId": "shardId-000000000003",
                "ParentShards": ["shardId-000000000000", "shardId-000000000001"],
                "HashKeyRange": {"StartingHashKey": "101", "EndingHashKey": str(2**128 - 1)},
            },
        ],
    ),
    "integer and missing timestamps": _body(
        [_record(10, "a", b"x", ts=1_700_000_000), _record(11, "b", b"y", ts=None)],
        NextShardIterator="BBBB",
    ),
    "huge sequence numbers": _body(
        [_record(49_590_338_271_490_256_608_559_692_538_361_571_095_921_575_989_136_588_898, "k", b"v")],
        NextShardIterator="C",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_path_matches_botocore(name: str) -> None:
    body = CASES[name]
    assert page_as_botocore(decode_get_records(body)) == _botocore_parse(body)


record_strategy = st.builds(
    _record,
    seq=st.integers(min_value=0, max_value=10**40),
    pk=st.text(min_size=0, max_size=20),
    data=st.binary(max_size=64),
    ts=st.one_of(st.none(), st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False)),
    enc=st.sampled_from([None, "NONE", "KMS"]),
)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(record_strategy, max_size=30), behind=st.integers(0, 10**9), it=st.text(max_size=8))
def test_fast_path_matches_botocore_on_random_bodies(records: list[dict], behind: int, it: str) -> None:
    body = _body(records, NextShardIterator=it, MillisBehindLatest=behind)
    assert page_as_botocore(decode_get_records(body)) == _botocore_parse(body)


def test_parser_hook_returns_page_and_scalars() -> None:
    body = CASES["unicode keys and empty data"]
    parsed = FastGetRecordsParser().parse({"body": body, "headers": {}, "status_code": 200}, _OUTPUT)
    page = parsed[PAGE_KEY]
    assert page.partition_keys == ["ключ-🔑", "日本語", ""]
    assert page.data == [b"", "données".encode(), b"\x00\xff" * 10]
    assert parsed["NextShardIterator"] == "AAAA"
    assert parsed["MillisBehindLatest"] == 0
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_other_operations_and_errors_use_botocore() -> None:
    factory = FastResponseParserFactory()
    parser = factory.create_parser("json")
    shape = _MODEL.operation_model("ListShards").output_shape
    body = json.dumps({"Shards": [{"ShardId": "shardId-000000000000", "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}).encode()
    parsed = parser.parse({"body": body, "headers": {}, "status_code": 200}, shape)
    assert parsed["Shards"][0]["ShardId"] == "shardId-000000000000"
    error_body = b'{"__type":"ExpiredIteratorException","message":"Iterator expired"}'
    error = parser.parse({"body": error_body, "headers": {}, "status_code": 400}, _OUTPUT)
    assert error["Error"]["Code"] == "ExpiredIteratorException"
    assert PAGE_KEY not in error
    assert type(factory.create_parser("rest-json")) is parsers.RestJSONParser


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"Records": [{"SequenceNumber": "1"}]}', b'{"Records": [{"Data": "AAAA"}]}', b"[1,2]"],
)
def test_malformed_bodies_raise_a_named_error(body: bytes) -> None:
    with pytest.raises(MalformedResponseError, match="GetRecords response body"):
        decode_get_records(body)


CANARY = "CANARY-s3cret-payload"
_CANARY_B64 = base64.b64encode(CANARY.encode()).decode()


def _one_record(**fields: object) -> bytes:
    record = {"SequenceNumber": "1", "Data": _CANARY_B64, "PartitionKey": CANARY, **fields}
    return json.dumps({"Records": [record], "NextShardIterator": "AAAA"}).encode()


MALFORMED = {
    "not json": (f"{CANARY} is not json".encode(), "not JSON"),
    "truncated": (_one_record()[:-20], "not JSON"),
    "not utf-8": (b'{"Records": [{"PartitionKey": "' + CANARY.encode() + b'\xff"}]}', "not JSON"),
    "top level array": (json.dumps([CANARY]).encode(), "top level"),
    "records not a list": (json.dumps({"Records": {CANARY: 1}}).encode(), "'Records'"),
    "record not an object": (json.dumps({"Records": [CANARY]}).encode(), "Records[0]"),
    "data not base64": (_one_record(Data=CANARY), "Records[0].Data"),
    "data not ascii": (_one_record(Data=CANARY + "é"), "Records[0].Data"),
    "data not a string": (_one_record(Data={CANARY: 1}), "Records[0].Data"),
    "data missing": (json.dumps({"Records": [{"SequenceNumber": "1", "PartitionKey": CANARY}]}).encode(), "Records[0].Data"),
    "sequence number missing": (json.dumps({"Records": [{"Data": _CANARY_B64, "PartitionKey": CANARY}]}).encode(), "Records[0].SequenceNumber"),
    "child hash key not a number": (
        json.dumps(
            {"Records": [], "ChildShards": [{"ShardId": "shardId-000000000001", "ParentShards": [],
                                             "HashKeyRange": {"StartingHashKey": CANARY, "EndingHashKey": "1"}}]}
        ).encode(),
        "ChildShards[0].HashKeyRange.StartingHashKey",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_body_errors_name_the_field_never_the_record_data(name: str) -> None:
    body, field = MALFORMED[name]
    with pytest.raises(MalformedResponseError) as info:
        decode_get_records(body)
    message = str(info.value)
    assert field in message
    rendered = "".join(traceback.format_exception(info.value))  # chained causes too: what a log shows
    assert CANARY not in rendered and _CANARY_B64 not in rendered


# -- a body shorter than its Content-Length, and success bodies botocore would read as {'message': body} ---

_LIST_SHARDS = _MODEL.operation_model("ListShards").output_shape
_LIST_BODY = json.dumps({"Shards": [{"ShardId": "shardId-000000000000", "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}).encode()


def _response(body: bytes, status: int = 200, operation: str = "ListShards", **headers: str) -> dict:
    return {"body": body, "headers": headers, "status_code": status, "context": {"operation_name": operation}}


@pytest.mark.parametrize(("shape", "body"), [(_OUTPUT, CASES["unicode keys and empty data"]), (_LIST_SHARDS, _LIST_BODY)])
@pytest.mark.parametrize("status", [200, 400])
def test_a_body_shorter_than_its_content_length_is_truncated_not_parsed(shape, body: bytes, status: int) -> None:
    cut = body[: len(body) // 2]
    with pytest.raises(TruncatedResponseError, match=f"after {len(cut)} of the {len(body)} bytes") as info:
        FastGetRecordsParser().parse(_response(cut, status, **{"Content-Length": str(len(body))}), shape)
    assert info.value.retriable


def test_content_length_is_only_compared_when_the_body_is_what_came_over_the_wire() -> None:
    parser = FastGetRecordsParser()
    whole = parser.parse(_response(_LIST_BODY, **{"content-length": str(len(_LIST_BODY))}), _LIST_SHARDS)
    assert whole["Shards"][0]["ShardId"] == "shardId-000000000000"
    # A decoded body (Content-Encoding) or no Content-Length (chunked) cannot be compared.
    decoded = parser.parse(_response(_LIST_BODY, **{"content-length": "5", "content-encoding": "gzip"}), _LIST_SHARDS)
    assert decoded["Shards"]
    assert parser.parse(_response(_LIST_BODY), _LIST_SHARDS)["Shards"]


@pytest.mark.parametrize("body", [b"<html>" + CANARY.encode() + b"</html>", _LIST_BODY[:-5], json.dumps([CANARY]).encode()])
def test_a_whole_success_body_that_is_not_a_json_object_is_malformed(body: bytes) -> None:
    """On a body that is not JSON botocore's own parser returns {} (its {'message': body} fallback has no
    ListShards member): a stream without shards. On a JSON array it fails with AttributeError."""
    if not body.startswith(b"["):
        assert "Shards" not in parsers.create_parser("json").parse(_response(body), _LIST_SHARDS)
    with pytest.raises(MalformedResponseError, match="ListShards response body") as info:
        FastGetRecordsParser().parse(_response(body), _LIST_SHARDS)
    assert not info.value.retriable
    assert CANARY not in "".join(traceback.format_exception(info.value))


def test_error_bodies_and_empty_success_bodies_keep_botocores_parsing() -> None:
    parser = FastGetRecordsParser()
    error = parser.parse(_response(b"<html>Bad Gateway</html>", 502), _LIST_SHARDS)
    assert error["Error"]["Code"] == "502"  # translated by status, as before
    assert parser.parse(_response(b""), _LIST_SHARDS)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert parser.parse(_response(b"", operation="CreateStream"), None)["ResponseMetadata"]["HTTPStatusCode"] == 200
