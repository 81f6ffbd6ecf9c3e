"""Enhanced fan-out values and pure conversions, shared by both fan-out clients; no calls.

An event is a :class:`FanOutEvent` whose ``page`` is the RecordPage a GetRecords poll returns."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigurationError, ConsumerStreamMismatchError
from ..positions import Position
from ..records import RecordPage
from ..retry import RetryPolicy
from .body_decode import decode_subscribe_event
from .page_dicts import CONTINUATION, page_from_botocore

if TYPE_CHECKING:
    from ..config import AwsSettings

CONSUMER_LIMIT = 20
"""Enhanced fan-out consumers AWS allows per stream."""


class KinesisCalls(Protocol):
    """What the fan-out calls use of a Kinesis client (sync or async): its botocore client and settings."""

    endpoint: str
    settings: AwsSettings

    @property
    def botocore_client(self) -> Any: ...


@dataclass(frozen=True)
class ConsumerDescription:
    """A registered stream consumer, as DescribeStreamConsumer reports it."""

    name: str
    arn: str
    status: str  # CREATING | ACTIVE | DELETING
    created: datetime | None

    @property
    def stream_arn(self) -> str:
        return consumer_stream_arn(self.arn)


@dataclass(frozen=True)
class FanOutEvent:
    """One SubscribeToShardEvent; ``page.next_iterator`` is its continuation sequence number, so
    ``shard_ended`` is True exactly on a closed shard's last event (with ``page.child_shards``)."""

    page: RecordPage
    continuation_sequence_number: str | None

    @property
    def shard_ended(self) -> bool:
        return self.continuation_sequence_number is None


def consumer_stream_arn(consumer_arn: str) -> str:
    """The stream ARN inside a consumer ARN (``<stream ARN>/consumer/<name>:<epoch>``)."""
    stream_arn, sep, rest = consumer_arn.partition("/consumer/")
    if not sep or not rest or ":stream/" not in stream_arn:
        raise ConfigurationError(
            f"{consumer_arn!r} is not a Kinesis consumer ARN "
            "(arn:aws:kinesis:REGION:ACCOUNT:stream/STREAM/consumer/NAME:EPOCH)"
        )
    return stream_arn


def check_consumer_stream(consumer_arn: str, stream_arn: str) -> None:
    """Refuse a consumer of another stream: shard ids repeat across streams, so it would read the wrong one."""
    owner = consumer_stream_arn(consumer_arn)
    if owner != stream_arn:
        raise ConsumerStreamMismatchError(
            f"consumer {consumer_arn} is registered on {owner}, not on {stream_arn}. Consumer names are per "
            "stream: register the consumer on this stream (the same name is fine) and use that ARN."
        )


def starting_position(position: Position) -> dict[str, Any]:
    """SubscribeToShard's StartingPosition for a :class:`Position` (the GetShardIterator fields, renamed)."""
    args = position.iterator_args()
    out: dict[str, Any] = {"Type": args["ShardIteratorType"]}
    if "StartingSequenceNumber" in args:
        out["SequenceNumber"] = args["StartingSequenceNumber"]
    if "Timestamp" in args:
        out["Timestamp"] = args["Timestamp"]
    return out


def consumer_from(raw: dict[str, Any]) -> ConsumerDescription:
    """A Consumer / ConsumerDescription structure as botocore parses it."""
    return ConsumerDescription(
        name=raw["ConsumerName"],
        arn=raw["ConsumerARN"],
        status=raw["ConsumerStatus"],
        created=raw.get("ConsumerCreationTimestamp"),
    )


def event_from(raw: dict[str, Any]) -> FanOutEvent:
    """A SubscribeToShardEvent as botocore parses it (Data as bytes, timestamps as datetimes)."""
    page = page_from_botocore(raw, CONTINUATION)
    return FanOutEvent(page=page, continuation_sequence_number=page.next_iterator)


def decoded_event(message: Any) -> FanOutEvent | None:
    """A raw event-stream message as a :class:`FanOutEvent`, decoded by the fast path; None for
    another event type or an error message, for botocore's event parser to raise."""
    headers = message.headers
    if headers.get(":message-type") != "event" or headers.get(":event-type") != "SubscribeToShardEvent":
        return None
    page = decode_subscribe_event(message.payload)
    return FanOutEvent(page=page, continuation_sequence_number=page.next_iterator)


def is_error_message(message: Any) -> bool:
    """An event-stream error or exception message (not an event): botocore's parser raises it."""
    return message.headers.get(":message-type") != "event"


def subscribe_request(
    consumer_arn: str, shard_id: str, position: Position, stream_arn: str | None
) -> tuple[str, dict[str, Any]]:
    """The SubscribeToShard call's name for errors and its arguments; refuses a consumer of another stream."""
    if stream_arn is not None:
        check_consumer_stream(consumer_arn, stream_arn)
    what = f"SubscribeToShard on shard {shard_id} for consumer {consumer_arn}"
    return what, {"ConsumerARN": consumer_arn, "ShardId": shard_id, "StartingPosition": starting_position(position)}


def subscribe_policy(policy: RetryPolicy) -> RetryPolicy:
    """The client's policy, but at least 1 s (growing to 5 s) between SubscribeToShard attempts: AWS
    allows one call a second per shard and consumer, and none within 5 s of the last success."""
    initial = max(policy.initial_backoff_s, 1.0)
    return replace(policy, initial_backoff_s=initial, max_backoff_s=max(policy.max_backoff_s, 5.0, initial))
