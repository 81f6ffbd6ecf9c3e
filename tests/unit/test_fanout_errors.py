"""Errors on a SubscribeToShard event stream: each documented one mapped, and what both fan-out drivers do.

An error on the event stream arrives after the HTTP answer (200), so botocore raises it with its
code and message and no HTTP status. The table tests feed real event-stream messages to
``FanOut.subscribe`` and ``AsyncFanOut.subscribe`` through botocore's and aiobotocore's parsers;
the driver tests inject the same botocore error on the fake's event stream (``event_stream_error``),
which raises it mapped as ``FanOut.subscribe`` maps it.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import struct
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace

import botocore.session
import pytest
from aiobotocore.parsers import AioResponseParserFactory
from fake_kinesis import START, FakeKinesis, event_stream_error, shard_id

from kinesis_src.aws.async_fanout import AsyncFanOut
from kinesis_src.aws.decode import FastResponseParserFactory
from kinesis_src.aws.fanout import FanOut
from kinesis_src.aws.fanout_errors import EVENT_STREAM_ERRORS, stream_error
from kinesis_src.errors import (
    AccessDeniedError,
    EncryptionKeyError,
    KinesisSourceError,
    ResourceNotFoundError,
    RetriesExhaustedError,
    ServiceUnavailableError,
    SubscriptionBusyError,
    SubscriptionFailedError,
    ThrottledError,
)
from kinesis_src.positions import Position
from kinesis_src.records import RecordPage
from kinesis_src.retry import NO_RETRY
from kinesis_src.retrieval import async_fanout
from kinesis_src.retrieval.async_fanout import UNKNOWN_ERRORS_IN_A_ROW, FanOutFetcher
from kinesis_src.retrieval.fanout import BROKEN_SUBSCRIPTIONS, FanOutReader
from kinesis_src.retrieval.subscriptions import backoff_s

STREAM = "orders"
SHARD = shard_id(0)
CONSUMER = "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/billing:1700000000"

pytestmark = pytest.mark.timeout(60)  # a driver resubscribing forever fails here

# -- the mapping, through botocore's own parse of an event-stream error message -------------------

# code -> (class, retriable, what the message must say besides the shard and the consumer)
TABLE: dict[str, tuple[type[KinesisSourceError], bool, str]] = {
    "InternalFailureException": (ServiceUnavailableError, True, "resubscrib"),
    "KMSThrottlingException": (ThrottledError, True, "resubscrib"),
    "ResourceInUseException": (SubscriptionBusyError, True, "retrying"),
    "ResourceNotFoundException": (ResourceNotFoundError, False, "describe-stream-consumer"),
    "KMSDisabledException": (EncryptionKeyError, False, "enable"),
    "KMSInvalidStateException": (EncryptionKeyError, False, "key state"),
    "KMSAccessDeniedException": (AccessDeniedError, False, "kms:Decrypt"),
    "KMSNotFoundException": (EncryptionKeyError, False, "no longer exists"),
    "KMSOptInRequired": (EncryptionKeyError, False, "subscri"),
}


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def _message(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    body = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return body + struct.pack(">I", binascii.crc32(body))


class _Body:
    """The HTTP body of a SubscribeToShard answer, for botocore (``stream``) and aiobotocore (``content``)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.content = self

    def stream(self) -> Iterator[bytes]:
        yield self._data

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        yield self._data, True

    def close(self) -> None:
        pass


class _Client:
    """A botocore or aiobotocore client whose SubscribeToShard answers ``wire`` (after the initial response)."""

    def __init__(self, wire: bytes, aio: bool) -> None:
        self.wire, self.aio = wire, aio

    def subscribe_to_shard(self, **_: object) -> object:
        model = botocore.session.get_session().get_service_model("kinesis")
        factory = AioResponseParserFactory() if self.aio else FastResponseParserFactory()
        initial = _message({":message-type": "event", ":event-type": "initial-response"}, b"{}")
        response = {"status_code": 200, "headers": {"content-type": "application/vnd.amazon.eventstream"},
                    "body": _Body(initial + self.wire), "context": {"operation_name": "SubscribeToShard"}}
        return factory.create_parser("json").parse(response, model.operation_model("SubscribeToShard").output_shape)


def raised_by_subscribe(wire: bytes, *, aio: bool = False) -> BaseException:
    """What FanOut.subscribe (or AsyncFanOut.subscribe) raises when the event stream carries ``wire``."""
    kinesis = SimpleNamespace(endpoint="https://kinesis", settings=SimpleNamespace(retry=NO_RETRY),
                              botocore_client=_Client(wire, aio))
    start = Position.trim_horizon()

    async def drain() -> None:
        async for _ in AsyncFanOut(kinesis).subscribe(CONSUMER, SHARD, start):  # type: ignore[arg-type]
            pass

    with pytest.raises(Exception) as caught:
        if aio:
            asyncio.run(drain())
        else:
            list(FanOut(kinesis).subscribe(CONSUMER, SHARD, start))  # type: ignore[arg-type]
    return caught.value


def exception_message(code: str) -> bytes:
    return _message({":message-type": "exception", ":exception-type": code, ":content-type": "application/json"},
                    json.dumps({"message": f"the service says {code}"}).encode())


def test_the_table_covers_every_error_botocores_model_documents_on_the_event_stream() -> None:
    shape = botocore.session.get_session().get_service_model("kinesis").shape_for("SubscribeToShardEventStream")
    documented = {name for name, member in shape.members.items() if member.metadata.get("exception")}
    assert documented == set(TABLE) == set(EVENT_STREAM_ERRORS)


@pytest.mark.parametrize("aio", [False, True], ids=["botocore", "aiobotocore"])
@pytest.mark.parametrize("code", sorted(TABLE))
def test_each_documented_event_stream_error_maps_to_its_class_naming_shard_consumer_and_fix(
    code: str, aio: bool
) -> None:
    cls, retriable, fix = TABLE[code]
    mapped = raised_by_subscribe(exception_message(code), aio=aio)
    assert type(mapped) is cls and mapped.retriable is retriable
    assert SHARD in str(mapped) and CONSUMER in str(mapped) and code in str(mapped)
    assert fix in str(mapped)


@pytest.mark.parametrize("aio", [False, True], ids=["botocore", "aiobotocore"])
def test_an_unknown_event_stream_error_is_a_retriable_subscription_failure_naming_its_code(aio: bool) -> None:
    """botocore's parse drops the code of an exception type its model does not list: subscribe keeps it."""
    mapped = raised_by_subscribe(exception_message("BrandNewException"), aio=aio)
    assert isinstance(mapped, SubscriptionFailedError) and mapped.retriable and mapped.code == "BrandNewException"
    assert SHARD in str(mapped) and CONSUMER in str(mapped) and "the service says BrandNewException" in str(mapped)


def test_an_error_type_message_internal_failure_is_transient_too() -> None:
    error = _message({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    mapped = raised_by_subscribe(error)
    assert isinstance(mapped, ServiceUnavailableError) and mapped.retriable
    assert isinstance(stream_error(event_stream_error("InternalFailure"), "W", "e"), ServiceUnavailableError)


def test_the_backoff_doubles_to_its_bound_and_jitters_within_the_upper_half() -> None:
    assert [backoff_s(n, 1.0, 30.0, rand=lambda: 1.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert [backoff_s(n, 1.0, 30.0, rand=lambda: 0.0) for n in range(1, 4)] == [0.5, 1, 2]
    assert backoff_s(1, 0.0, 30.0) == 0.0


@pytest.mark.parametrize("in_a_row", [1_024, 1_025, 1_100, 10**6, 10**400], ids=["1024", "1025", "1100", "1e6", "1e400"])
def test_the_backoff_after_any_number_of_failed_event_streams_is_the_bound(in_a_row: int) -> None:
    """A transient error that lasts for hours (1,025 streams in a row) waits the bound, not OverflowError."""
    assert backoff_s(in_a_row, 1.0, 30.0, rand=lambda: 1.0) == 30.0


# -- the drivers on the fake ------------------------------------------------------------------------


def stream_of(n: int) -> tuple[FakeKinesis, str, list[str]]:
    """One shard of ``n`` records, one record an event, and a registered consumer."""
    fake = FakeKinesis()
    fake.create_stream(STREAM)
    seqs = [fake.put_record(STREAM, f"k{i}", b"d%d" % i, shard_id=SHARD, arrival=START + i)["SequenceNumber"]
            for i in range(n)]
    fake.records_per_event = 1
    return fake, fake.register_consumer(fake.stream(STREAM).arn, "app").arn, seqs


def starts(fake: FakeKinesis) -> list[Position | None]:
    return [c.position for c in fake.calls_to("subscribe", SHARD)]


def read_all(fake: FakeKinesis, arn: str, sleeps: list[float]) -> list[str]:
    reader = FanOutReader(fake.fan_out(), arn, STREAM, SHARD, Position.trim_horizon(),  # type: ignore[arg-type]
                          stream_arn=fake.stream(STREAM).arn, sleep=sleeps.append)
    return [r.sequence_number for r in reader.read(until_caught_up=True).records()]


def test_a_spark_task_resubscribes_after_an_internal_failure_on_the_event_stream() -> None:
    fake, arn, seqs = stream_of(3)
    fake.inject("subscribe_event", event_stream_error("InternalFailureException"), shard_id=SHARD, calls=(2,))
    sleeps: list[float] = []
    assert read_all(fake, arn, sleeps) == seqs
    assert starts(fake) == [Position.trim_horizon(), Position.after_sequence(seqs[0])]
    assert len(sleeps) == 1 and fake.subscriptions_open == 0


def test_a_spark_tasks_slice_of_two_shards_reads_both_whole_when_one_shards_stream_fails_transiently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The task side as Spark runs it (``read_slice`` per shard of a partition with consumerMode=efo)."""
    from kinesis_src.retrieval import fanout
    from kinesis_src.retrieval.registration import FanOutTarget
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice
    from kinesis_src.spark.tasks import read_slice

    monkeypatch.setattr(fanout, "BROKEN_BACKOFF_S", 0.0)
    fake = FakeKinesis()
    fake.create_stream(STREAM, shard_count=2)
    shards = [shard_id(0), shard_id(1)]
    put = {sid: [fake.put_record(STREAM, f"k{i}", b"d", shard_id=sid)["SequenceNumber"] for i in range(3)]
           for sid in shards}
    fake.records_per_event = 1
    fake.inject("subscribe_event", event_stream_error("KMSThrottlingException"), shard_id=shards[0], calls=(2,))
    stream_arn = fake.stream(STREAM).arn
    target = FanOutTarget(fake.register_consumer(stream_arn, "app").arn, stream_arn, "app")
    pieces = tuple(ShardSlice(sid, Position.trim_horizon().to_dict()) for sid in shards)
    partition = KinesisPartition(0, STREAM, Endpoint("us-east-1", None, None), pieces, fan_out=target)
    read = {p.shard_id: [r.sequence_number for r in read_slice(fake, partition, p).records()]  # type: ignore[arg-type]
            for p in pieces}
    assert read == put and [fake.count("subscribe", sid) for sid in shards] == [2, 1]


def test_a_spark_task_counts_unknown_event_stream_errors_as_breaks_and_gives_up_after_five() -> None:
    fake, arn, _ = stream_of(1)
    fake.inject("subscribe_event", event_stream_error("BrandNewException"), shard_id=SHARD, calls=range(1, 100))
    with pytest.raises(SubscriptionFailedError, match="BrandNewException"):
        read_all(fake, arn, [])
    assert fake.count("subscribe") == BROKEN_SUBSCRIPTIONS


def test_a_spark_task_fails_at_once_on_a_configuration_error_of_the_event_stream() -> None:
    fake, arn, _ = stream_of(1)
    fake.inject("subscribe_event", event_stream_error("KMSDisabledException"), shard_id=SHARD)
    with pytest.raises(EncryptionKeyError, match=SHARD):
        read_all(fake, arn, [])
    assert fake.count("subscribe") == 1


def fetch(fake: FakeKinesis, arn: str, sleeps: list[float]) -> list[str]:
    """Run the Consumer's driver on the shard until it stops (the shard is open: only an error stops it
    early); the sequence numbers delivered."""
    delivered: list[str] = []

    async def deliver(page: RecordPage) -> None:
        delivered.extend(page.sequence_numbers)

    async def on_end(page: RecordPage) -> None:
        raise AssertionError("the shard is open")

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    f = FanOutFetcher(fake.aio().fan_out(), arn, STREAM, SHARD, Position.trim_horizon(),  # type: ignore[arg-type]
                      deliver=deliver, on_end=on_end, stream_arn=fake.stream(STREAM).arn, sleep=sleep)

    async def until_read_or_failed() -> None:
        task = asyncio.create_task(f.run())
        while not task.done() and len(delivered) < len(fake.shard(STREAM, SHARD).records):
            await asyncio.sleep(0.001)
        if task.done():
            task.result()
        task.cancel()

    asyncio.run(asyncio.wait_for(until_read_or_failed(), 10))
    return delivered


def test_the_consumer_driver_gives_up_after_ten_unknown_errors_in_a_row_with_backoff_growing_to_its_bound() -> None:
    fake, arn, _ = stream_of(1)
    fake.inject("subscribe_event", event_stream_error("BrandNewException"), shard_id=SHARD,
                calls=range(1, UNKNOWN_ERRORS_IN_A_ROW + 1))
    sleeps: list[float] = []
    with pytest.raises(RetriesExhaustedError, match="BrandNewException") as caught:
        fetch(fake, arn, sleeps)
    assert SHARD in str(caught.value) and not caught.value.retriable
    assert isinstance(caught.value.last_error, SubscriptionFailedError)
    assert fake.count("subscribe") == UNKNOWN_ERRORS_IN_A_ROW and len(sleeps) == UNKNOWN_ERRORS_IN_A_ROW - 1
    initial, bound = async_fanout.BROKEN_PAUSE_S, async_fanout.MAX_BROKEN_PAUSE_S
    for n, slept in enumerate(sleeps, 1):
        ceiling = min(bound, initial * 2 ** (n - 1))
        assert ceiling / 2 <= slept <= ceiling, (n, slept)
    assert max(sleeps) <= bound


def test_an_event_between_unknown_errors_starts_the_count_again() -> None:
    fake, arn, seqs = stream_of(3)
    limit = UNKNOWN_ERRORS_IN_A_ROW
    # limit - 1 failed subscriptions, one with an event before it breaks, limit - 1 more failed ones
    fake.inject("subscribe_event", event_stream_error("BrandNewException"), shard_id=SHARD,
                calls=[*range(1, limit), *range(limit + 1, 2 * limit)])
    assert fetch(fake, arn, []) == seqs
    assert fake.count("subscribe") == 2 * limit - 1  # 18 failed, the last one read to the tip


def test_the_consumer_driver_fails_at_once_on_a_configuration_error_of_the_event_stream() -> None:
    fake, arn, _ = stream_of(1)
    fake.inject("subscribe_event", event_stream_error("KMSAccessDeniedException"), shard_id=SHARD)
    with pytest.raises(AccessDeniedError, match="kms:Decrypt"):
        fetch(fake, arn, [])
    assert fake.count("subscribe") == 1
