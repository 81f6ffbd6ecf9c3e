"""Enhanced fan-out (EFO): stream consumers and SubscribeToShard, on botocore and aiobotocore.

With EFO each registered consumer gets its own 2 MB/s per shard, pushed over
an HTTP/2-style event stream instead of polled with GetRecords. A
subscription lasts at most 5 minutes; its events carry the records, a
``ContinuationSequenceNumber`` to resubscribe from, and, once a closed shard
is read to its end, ``ChildShards`` with a null continuation. Each event
becomes a :class:`FanOutEvent` whose ``page`` is the same
:class:`~kinesis_src.records.RecordPage` a GetRecords poll returns, with
``next_iterator`` set to the continuation (None exactly at shard end), so
the readers above treat both modes alike.

:class:`FanOut` is the botocore client; its aiobotocore twin
:class:`~.async_fanout.AsyncFanOut` shares every pure part of this module.
Every call goes through :func:`.boundary.call` / :func:`.boundary.acall`
(translation, one retry policy). On top of that, answers that only EFO has
are mapped here: a refused subscription (:class:`SubscriptionBusyError`,
retried at least a second apart), the consumer limit
(:class:`ConsumerLimitError`), and endpoints without EFO
(:class:`FanOutUnsupportedError`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Iterator, TypeVar

import urllib3.exceptions
from botocore.eventstream import NoInitialResponseError
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from ..errors import (
    ConfigurationError,
    ConsumerLimitError,
    ConsumerStreamMismatchError,
    EndpointUnreachableError,
    FanOutUnsupportedError,
    KinesisSourceError,
    ResourceNotFoundError,
    SubscriptionBusyError,
    ThrottledError,
)
from ..positions import Position
from ..records import RecordPage
from ..retry import RetryPolicy
from .boundary import call, translate
from .decode import child_shard, decode_subscribe_event
from .kinesis import KinesisClient

T = TypeVar("T")

CONSUMER_LIMIT = 20
"""Enhanced fan-out consumers AWS allows per stream."""

_UNSUPPORTED_CODES = frozenset({"UnknownOperationException", "UnknownOperation", "InvalidAction"})
_BUSY_CODES = frozenset({"ResourceInUseException", "LimitExceededException"})


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
    """One SubscribeToShardEvent.

    ``page.next_iterator`` is the continuation sequence number, so
    ``page.shard_ended`` is True exactly on the last event of a closed shard
    (which then carries ``page.child_shards``).
    """

    page: RecordPage
    continuation_sequence_number: str | None

    @property
    def shard_ended(self) -> bool:
        return self.continuation_sequence_number is None


# -- pure conversions ----------------------------------------------------------------------------


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


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    return value.timestamp() if isinstance(value, datetime) else float(value)


def event_from(raw: dict[str, Any]) -> FanOutEvent:
    """A SubscribeToShardEvent as botocore parses it (Data as bytes, timestamps as datetimes)."""
    records = raw.get("Records") or []
    continuation = raw.get("ContinuationSequenceNumber")
    page = RecordPage(
        partition_keys=[r.get("PartitionKey") for r in records],
        data=[bytes(r.get("Data") or b"") for r in records],
        sequence_numbers=[r["SequenceNumber"] for r in records],
        arrival_epoch=[_epoch(r.get("ApproximateArrivalTimestamp")) for r in records],
        encryption_types=[r.get("EncryptionType") for r in records],
        next_iterator=continuation,
        millis_behind_latest=raw.get("MillisBehindLatest"),
        child_shards=tuple(child_shard(c) for c in raw.get("ChildShards") or ()),
    )
    return FanOutEvent(page=page, continuation_sequence_number=continuation)


def decoded_event(message: Any) -> FanOutEvent | None:
    """A raw event-stream message as a :class:`FanOutEvent`, decoded by the fast path; None otherwise.

    None means another event type, or an error or exception message, which
    the caller hands to botocore's own event parser to be raised. Events
    are read below botocore's parsing (``EventStream._event_generator``,
    botocore and aiobotocore alike): its model walk costs 9-14x the fast
    decode per record, and events carry every record EFO delivers.
    """
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
    """The client's policy, but at least 1 s (growing to 5 s) between SubscribeToShard attempts.

    AWS allows one call per second per shard and consumer and refuses a new
    one within 5 s of the last successful one: a 0.1 s first retry only
    burns attempts.
    """
    initial = max(policy.initial_backoff_s, 1.0)
    return replace(policy, initial_backoff_s=initial, max_backoff_s=max(policy.max_backoff_s, 5.0, initial))


# -- errors only fan-out has ---------------------------------------------------------------------


def _code(error: BaseException) -> str | None:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or "") or None
    return None


def unsupported(what: str, endpoint: str, detail: str) -> FanOutUnsupportedError:
    return FanOutUnsupportedError(
        f"{what}: the endpoint {endpoint} does not support enhanced fan-out ({detail}). EFO needs real "
        "Kinesis or LocalStack (`python localstack/localstack_host.py start`); with this endpoint use "
        "consumerMode=polling."
    )


def fanout_error(error: BaseException, what: str, endpoint: str, *, subscribing: bool = False) -> KinesisSourceError | None:
    """The kinesis-src error for an answer specific to EFO, or None to leave it to :func:`.boundary.translate`."""
    if isinstance(error, NoInitialResponseError) or (
        isinstance(error, ResponseParserError) and "initial-response" in str(error)
    ):
        # kinesis-mock answers SubscribeToShard with events but no initial-response event.
        return unsupported(what, endpoint, "its SubscribeToShard answer has no initial-response event")
    code = _code(error)
    if code in _UNSUPPORTED_CODES:
        return unsupported(what, endpoint, code)
    if subscribing and code in _BUSY_CODES:
        return SubscriptionBusyError(
            f"{what}: {code}: AWS allows one subscription per shard and consumer, and a new one at most "
            "once per second (5 s after the last): retrying"
        )
    return None


def _stream_error(error: Exception, what: str, endpoint: str) -> KinesisSourceError:
    """An error while reading events: the subscription is over; the caller resubscribes from its continuation."""
    mapped = fanout_error(error, what, endpoint, subscribing=True)
    if mapped is not None:
        return mapped
    if isinstance(error, (urllib3.exceptions.HTTPError, OSError)) or _is_aiohttp_error(error):
        return EndpointUnreachableError(f"{what}: the event stream from {endpoint} broke off ({type(error).__name__})")
    return translate(error, what, endpoint)


def _is_aiohttp_error(error: BaseException) -> bool:
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiobotocore depends on it
        return False
    return isinstance(error, aiohttp.ClientError)


def consumer_limit(stream_arn: str, names: list[str]) -> ConsumerLimitError:
    return ConsumerLimitError(
        f"stream {stream_arn} already has {len(names)} enhanced fan-out consumers, the most AWS allows per "
        f"stream ({CONSUMER_LIMIT}): {', '.join(sorted(names))}. Deregister unused ones, e.g. `aws kinesis "
        f"deregister-stream-consumer --stream-arn {stream_arn} --consumer-name NAME` (or "
        "kinesis_src.aws.FanOut(...).deregister_consumer), or read with consumerMode=polling."
    )


def _guarded(what: str, endpoint: str, fn: Callable[[], T], subscribing: bool = False) -> Callable[[], T]:
    def attempt() -> T:
        try:
            return fn()
        except Exception as exc:
            mapped = fanout_error(exc, what, endpoint, subscribing=subscribing)
            if mapped is None:
                raise
            raise mapped from exc

    return attempt


def _not_active_yet(what: str) -> ThrottledError:
    return ThrottledError(f"{what}: ResourceInUseException and no such consumer: the stream is not ACTIVE yet")


def _limit_or_rate(what: str, stream_arn: str, consumers: list[dict[str, Any]]) -> KinesisSourceError:
    """LimitExceededException on RegisterStreamConsumer is either the 20-consumer limit or a rate limit."""
    if len(consumers) >= CONSUMER_LIMIT:
        return consumer_limit(stream_arn, [c["ConsumerName"] for c in consumers])
    return ThrottledError(f"{what}: LimitExceededException with {len(consumers)} consumers: rate limited")


def _wait_timeout(consumer: ConsumerDescription, timeout_s: float, endpoint: str) -> KinesisSourceError:
    return KinesisSourceError(
        f"consumer {consumer.arn} still {consumer.status} after {timeout_s:.0f}s at {endpoint}"
    )


# -- botocore --------------------------------------------------------------------------------------


class FanOut:
    """EFO calls on a :class:`KinesisClient`'s botocore client (same endpoint, retry policy, parser)."""

    def __init__(self, kinesis: KinesisClient) -> None:
        self._kinesis = kinesis
        self.endpoint = kinesis.endpoint

    def _call(self, what: str, fn: Callable[[], T], *, subscribing: bool = False) -> T:
        policy = self._kinesis.settings.retry
        if subscribing:
            policy = subscribe_policy(policy)
        return call(what, self.endpoint, policy, _guarded(what, self.endpoint, fn, subscribing))

    def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        """Register ``name`` on the stream, or find it registered already; return it once ACTIVE.

        Idempotent, so every worker of an application may call it at start:
        ResourceInUseException for an existing name is answered by describing it.
        """
        what = f"RegisterStreamConsumer {name!r} on {stream_arn}"
        client = self._kinesis.botocore_client

        def register() -> dict[str, Any]:
            try:
                return client.register_stream_consumer(StreamARN=stream_arn, ConsumerName=name)["Consumer"]
            except ClientError as exc:
                if _code(exc) == "ResourceInUseException":
                    try:
                        out = client.describe_stream_consumer(StreamARN=stream_arn, ConsumerName=name)
                    except ClientError as missing:
                        if _code(missing) == "ResourceNotFoundException":
                            raise _not_active_yet(what) from exc
                        raise
                    return out["ConsumerDescription"]
                if _code(exc) == "LimitExceededException":
                    listed = client.list_stream_consumers(StreamARN=stream_arn, MaxResults=100)
                    raise _limit_or_rate(what, stream_arn, listed.get("Consumers", [])) from exc
                raise

        consumer = consumer_from(self._call(what, register))
        return self.wait_active(consumer.arn, timeout_s=timeout_s)

    def wait_active(self, consumer_arn: str, *, timeout_s: float = 60.0, poll_s: float = 0.5) -> ConsumerDescription:
        """Poll DescribeStreamConsumer until ACTIVE (AWS: seconds; a consumer cannot subscribe before)."""
        deadline = time.monotonic() + timeout_s
        while True:
            consumer = self.describe_consumer(consumer_arn)
            if consumer.status == "ACTIVE":
                return consumer
            if time.monotonic() > deadline:
                raise _wait_timeout(consumer, timeout_s, self.endpoint)
            time.sleep(poll_s)

    def describe_consumer(self, consumer_arn: str) -> ConsumerDescription:
        what = f"DescribeStreamConsumer {consumer_arn}"
        out = self._call(what, lambda: self._kinesis.botocore_client.describe_stream_consumer(ConsumerARN=consumer_arn))
        return consumer_from(out["ConsumerDescription"])

    def deregister_consumer(self, consumer_arn: str) -> bool:
        """Deregister; False if it was not registered (idempotent). Its subscriptions end."""
        what = f"DeregisterStreamConsumer {consumer_arn}"
        try:
            self._call(what, lambda: self._kinesis.botocore_client.deregister_stream_consumer(ConsumerARN=consumer_arn))
        except ResourceNotFoundError:
            return False
        return True

    def list_consumers(self, stream_arn: str) -> list[ConsumerDescription]:
        """Every consumer of the stream (all pages; a repeated NextToken ends the listing)."""
        client = self._kinesis.botocore_client
        consumers: list[ConsumerDescription] = []
        request: dict[str, Any] = {"StreamARN": stream_arn, "MaxResults": 100}
        seen: set[str] = set()
        while True:
            out = self._call(f"ListStreamConsumers of {stream_arn}", lambda req=request: client.list_stream_consumers(**req))
            page = [consumer_from(c) for c in out.get("Consumers", ())]
            consumers.extend(page)
            token = out.get("NextToken")
            if not token or not page or token in seen:  # LocalStack repeats the last name as a token
                return consumers
            seen.add(token)
            request = {"StreamARN": stream_arn, "NextToken": token, "MaxResults": 100}

    def subscribe(
        self, consumer_arn: str, shard_id: str, position: Position, *, stream_arn: str | None = None
    ) -> Iterator[FanOutEvent]:
        """Events of one subscription (at most 5 minutes), until it ends or the shard does.

        The call is made on the first ``next()``. Refusals (ResourceInUse,
        LimitExceeded) are retried at least 1 s apart. The generator returns
        after the shard's last event (``shard_ended``) or when the service
        ends the subscription; resubscribe with
        ``Position.after_sequence(event.continuation_sequence_number)``.
        An error while events arrive is raised translated, not retried.
        ``stream_arn``, when given, must own the consumer (see
        :class:`ConsumerStreamMismatchError`).
        """
        what, request = subscribe_request(consumer_arn, shard_id, position, stream_arn)
        client = self._kinesis.botocore_client
        out = self._call(what, lambda: client.subscribe_to_shard(**request), subscribing=True)
        stream = out["EventStream"]
        try:
            messages = stream._event_generator  # below botocore's parse: see decoded_event
            while True:
                try:
                    message = next(messages)
                    event = decoded_event(message)
                    if event is None and is_error_message(message):
                        stream._parse_event(message)  # an error message: botocore raises it
                except StopIteration:
                    return
                except Exception as exc:  # translated, never swallowed
                    raise _stream_error(exc, what, self.endpoint) from exc
                if event is not None:
                    yield event
                    if event.shard_ended:
                        return
        finally:
            stream.close()


__all__ = [
    "CONSUMER_LIMIT",
    "ConsumerDescription",
    "FanOut",
    "FanOutEvent",
    "check_consumer_stream",
    "consumer_from",
    "consumer_stream_arn",
    "decoded_event",
    "is_error_message",
    "subscribe_request",
    "event_from",
    "starting_position",
    "subscribe_policy",
]
