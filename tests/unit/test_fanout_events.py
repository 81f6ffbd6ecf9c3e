"""Enhanced fan-out without a server: event → RecordPage, positions, consumer ARNs, error mapping,
and SubscribeToShard's event stream through the fast response parser."""

from __future__ import annotations

import binascii
import json
from datetime import datetime, timezone
from typing import Iterator

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError
from scripted_endpoint import event as _event
from scripted_endpoint import message as _message

from kinesis_src.aws import FanOutEvent
from kinesis_src.aws.decode import FastResponseParserFactory
from kinesis_src.aws.fanout import (
    check_consumer_stream,
    consumer_from,
    consumer_limit,
    consumer_stream_arn,
    decoded_event,
    event_from,
    fanout_error,
    starting_position,
    subscribe_policy,
)
from kinesis_src.errors import (
    ConfigurationError,
    ConsumerLimitError,
    ConsumerStreamMismatchError,
    FanOutUnsupportedError,
    MalformedResponseError,
    SubscriptionBusyError,
)
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard
from kinesis_src.retry import RetryPolicy

STREAM_ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
CONSUMER_ARN = f"{STREAM_ARN}/consumer/billing:1795444866"
T0 = datetime(2026, 11, 23, 14, 41, 6, 572000, tzinfo=timezone.utc)


def _record(seq: str, key: str, data: bytes, ts: datetime = T0) -> dict[str, object]:
    return {"SequenceNumber": seq, "ApproximateArrivalTimestamp": ts, "Data": data, "PartitionKey": key,
            "EncryptionType": "NONE"}


def test_event_becomes_a_record_page_with_the_continuation_as_next_iterator() -> None:
    raw = {
        "Records": [_record("101", "k1", b"one"), _record("102", "k2", b"")],
        "ContinuationSequenceNumber": "102",
        "MillisBehindLatest": 7,
    }
    event = event_from(raw)
    assert isinstance(event, FanOutEvent)
    page = event.page
    assert page.partition_keys == ["k1", "k2"]
    assert page.data == [b"one", b""]
    assert page.sequence_numbers == ["101", "102"]
    assert page.arrival_epoch == [T0.timestamp(), T0.timestamp()]
    assert page.encryption_types == ["NONE", "NONE"]
    assert page.next_iterator == "102" == event.continuation_sequence_number
    assert page.millis_behind_latest == 7
    assert page.child_shards == ()
    assert not event.shard_ended and not page.shard_ended
    assert [r.approximate_arrival_timestamp for r in page.records("shardId-000000000000")] == [T0, T0]


def test_last_event_of_a_closed_shard_ends_it_and_names_the_children() -> None:
    raw = {
        "Records": [],
        "ContinuationSequenceNumber": None,
        "MillisBehindLatest": 0,
        "ChildShards": [
            {"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
             "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(2**127 - 1)}},
            {"ShardId": "shardId-000000000002", "ParentShards": ["shardId-000000000000"],
             "HashKeyRange": {"StartingHashKey": str(2**127), "EndingHashKey": str(2**128 - 1)}},
        ],
    }
    event = event_from(raw)
    assert event.shard_ended and event.page.shard_ended and len(event.page) == 0
    assert event.page.child_shards == (
        ChildShard("shardId-000000000001", ("shardId-000000000000",), 0, 2**127 - 1),
        ChildShard("shardId-000000000002", ("shardId-000000000000",), 2**127, 2**128 - 1),
    )


def test_event_without_optional_fields() -> None:
    event = event_from({"Records": [{"SequenceNumber": "5", "Data": b"x", "PartitionKey": "k"}],
                        "ContinuationSequenceNumber": "5"})
    assert event.page.arrival_epoch == [None]
    assert event.page.encryption_types == [None]
    assert event.page.millis_behind_latest is None


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (Position.trim_horizon(), {"Type": "TRIM_HORIZON"}),
        (Position.latest(), {"Type": "LATEST"}),
        (Position.at_sequence("49"), {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": "49"}),
        (Position.after_sequence("49"), {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": "49"}),
        # inside a KPL aggregate: the aggregate is read again from its start
        (Position.after_sequence("49", 3), {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": "49"}),
    ],
)
def test_starting_position_renames_the_iterator_fields(position: Position, expected: dict[str, str]) -> None:
    assert starting_position(position) == expected


def test_starting_position_at_timestamp() -> None:
    out = starting_position(Position.at_timestamp("2026-11-01T00:00:00Z"))
    assert out["Type"] == "AT_TIMESTAMP"
    assert out["Timestamp"] == Position.at_timestamp("2026-11-01T00:00:00Z").iterator_args()["Timestamp"]


def test_consumer_arn_names_its_stream() -> None:
    assert consumer_stream_arn(CONSUMER_ARN) == STREAM_ARN
    check_consumer_stream(CONSUMER_ARN, STREAM_ARN)
    with pytest.raises(ConfigurationError, match="not a Kinesis consumer ARN"):
        consumer_stream_arn(STREAM_ARN)


def test_consumer_of_another_stream_is_refused_naming_both() -> None:
    other = "arn:aws:kinesis:us-east-1:000000000000:stream/payments"
    with pytest.raises(ConsumerStreamMismatchError) as caught:
        check_consumer_stream(CONSUMER_ARN, other)
    assert STREAM_ARN in str(caught.value) and other in str(caught.value)
    assert "per stream" in str(caught.value)


def test_consumer_from_describe_output() -> None:
    consumer = consumer_from({"ConsumerName": "billing", "ConsumerARN": CONSUMER_ARN, "ConsumerStatus": "ACTIVE",
                              "ConsumerCreationTimestamp": T0, "StreamARN": STREAM_ARN})
    assert (consumer.name, consumer.arn, consumer.status, consumer.created) == ("billing", CONSUMER_ARN, "ACTIVE", T0)
    assert consumer.stream_arn == STREAM_ARN


def _client_error(code: str, operation: str = "SubscribeToShard") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


@pytest.mark.parametrize("code", ["ResourceInUseException", "LimitExceededException"])
def test_refused_subscription_is_retriable(code: str) -> None:
    error = fanout_error(_client_error(code), "SubscribeToShard on shard s", "http://e", subscribing=True)
    assert isinstance(error, SubscriptionBusyError) and error.retriable
    assert fanout_error(_client_error(code), "RegisterStreamConsumer", "http://e") is None


def test_endpoint_without_efo_is_named() -> None:
    missing_initial = ResponseParserError("First event was not of type initial-response")
    for error in (missing_initial, _client_error("UnknownOperationException", "RegisterStreamConsumer")):
        mapped = fanout_error(error, "SubscribeToShard on shard s", "http://127.0.0.1:4567", subscribing=True)
        assert isinstance(mapped, FanOutUnsupportedError) and not mapped.retriable
        assert "http://127.0.0.1:4567" in str(mapped)
        assert "LocalStack" in str(mapped) and "consumerMode=polling" in str(mapped)
    assert fanout_error(_client_error("ResourceNotFoundException"), "x", "e", subscribing=True) is None


def test_consumer_limit_message_says_how_to_free_a_slot() -> None:
    error = consumer_limit(STREAM_ARN, [f"c{i}" for i in range(20)])
    assert isinstance(error, ConsumerLimitError) and not error.retriable
    assert STREAM_ARN in str(error) and "deregister-stream-consumer" in str(error) and "(20)" in str(error)


def test_subscribe_policy_waits_at_least_a_second() -> None:
    policy = subscribe_policy(RetryPolicy(max_attempts=6, initial_backoff_s=0.05, max_backoff_s=1.0))
    assert policy.initial_backoff_s == 1.0 and policy.max_backoff_s == 5.0 and policy.max_attempts == 6
    assert subscribe_policy(RetryPolicy(initial_backoff_s=2.0, max_backoff_s=9.0)).max_backoff_s == 9.0


# -- the event stream through our response parser -------------------------------------------------


class _RawStream:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> Iterator[bytes]:
        yield from (self._data[i : i + 7] for i in range(0, len(self._data), 7))  # split mid-message

    def close(self) -> None:
        pass


def _parse_subscribe(body: bytes) -> dict[str, object]:
    model = botocore.session.get_session().get_service_model("kinesis")
    operation = model.operation_model("SubscribeToShard")
    parser = FastResponseParserFactory().create_parser(model.metadata["protocol"])
    response = {"status_code": 200, "headers": {"content-type": "application/vnd.amazon.eventstream"},
                "body": _RawStream(body), "context": {"operation_name": "SubscribeToShard"}}
    return parser.parse(response, operation.output_shape)


def test_subscribe_event_stream_parses_through_the_fast_parser() -> None:
    wire = _event("initial-response", {}) + _event("SubscribeToShardEvent", {
        "Records": [{"SequenceNumber": "101", "Data": "b25l", "PartitionKey": "k1",
                     "ApproximateArrivalTimestamp": T0.timestamp(), "EncryptionType": "NONE"}],
        "ContinuationSequenceNumber": "101",
        "MillisBehindLatest": 0,
    }) + _event("SubscribeToShardEvent", {"Records": [], "ChildShards": [
        {"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}], "MillisBehindLatest": 0})
    parsed = _parse_subscribe(wire)
    events = [event_from(raw["SubscribeToShardEvent"]) for raw in parsed["EventStream"]]  # type: ignore[attr-defined]
    assert [e.page.data for e in events] == [[b"one"], []]
    assert events[0].page.arrival_epoch == [T0.timestamp()]
    assert events[0].continuation_sequence_number == "101" and not events[0].shard_ended
    assert events[1].shard_ended and events[1].page.child_shards[0].shard_id == "shardId-000000000001"


def test_event_stream_without_initial_response_is_what_kinesis_mock_sends() -> None:
    wire = _event("SubscribeToShardEvent", {"Records": [], "ContinuationSequenceNumber": "1"})
    with pytest.raises(ResponseParserError, match="initial-response") as caught:
        _parse_subscribe(wire)
    assert isinstance(fanout_error(caught.value, "SubscribeToShard", "http://e"), FanOutUnsupportedError)


def _wire_events() -> bytes:
    records = [{"SequenceNumber": f"{100 + i}", "Data": binascii.b2a_base64(f"d{i}".encode() * i, newline=False).decode(),
                "PartitionKey": f"k{i % 3}", "ApproximateArrivalTimestamp": T0.timestamp() + i / 1000,
                **({"EncryptionType": "KMS"} if i % 2 else {})} for i in range(7)]
    return (
        _event("initial-response", {})
        + _event("SubscribeToShardEvent", {"Records": records[:4], "ContinuationSequenceNumber": "103", "MillisBehindLatest": 12})
        + _event("SomeFutureEvent", {"x": 1})
        + _event("SubscribeToShardEvent", {"Records": records[4:], "MillisBehindLatest": 0, "ChildShards": [
            {"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
             "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}]})
    )


def test_the_fast_event_decode_agrees_with_botocores_parse_on_every_field() -> None:
    """subscribe() decodes events below botocore's parser (decoded_event): same pages as the slow path."""
    slow = [event_from(raw["SubscribeToShardEvent"]) for raw in _parse_subscribe(_wire_events())["EventStream"]  # type: ignore[attr-defined]
            if "SubscribeToShardEvent" in raw]
    stream = _parse_subscribe(_wire_events())["EventStream"]
    fast = [e for e in map(decoded_event, stream._event_generator) if e is not None]  # type: ignore[attr-defined]
    assert len(fast) == len(slow) == 2
    for f, s in zip(fast, slow):
        assert f.continuation_sequence_number == s.continuation_sequence_number
        for column in ("partition_keys", "data", "sequence_numbers", "encryption_types", "next_iterator",
                       "millis_behind_latest", "child_shards"):
            assert getattr(f.page, column) == getattr(s.page, column), column
        assert f.page.arrival_epoch == pytest.approx(s.page.arrival_epoch)
    assert fast[1].shard_ended and fast[1].page.child_shards[0].parent_shards == ("shardId-000000000000",)


def test_a_malformed_event_payload_names_the_problem_not_the_contents() -> None:
    bad = _message({":message-type": "event", ":event-type": "SubscribeToShardEvent"},
                   json.dumps({"Records": [{"SequenceNumber": "1", "Data": "secret!!!", "PartitionKey": "pk"}]}).encode())
    stream = _parse_subscribe(_event("initial-response", {}) + bad)["EventStream"]
    with pytest.raises(MalformedResponseError) as caught:
        [decoded_event(m) for m in stream._event_generator]  # type: ignore[attr-defined]
    assert "SubscribeToShard event" in str(caught.value) and "secret" not in str(caught.value)
