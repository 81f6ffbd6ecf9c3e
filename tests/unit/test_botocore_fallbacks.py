"""Each private botocore/aiobotocore attribute the read path reaches has a public fallback that gives the same result.

For every internal in :mod:`kinesis_src.aws.botocore_internals`: its check
finds it on today's botocore, finds it missing on an object without it,
and, forced absent, the read path (real botocore and aiobotocore clients
against a scripted endpoint, tests/scripted_endpoint.py) gives the same
records, events, errors and retries as with it, and logs once which
fallback it took.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import botocore.parsers
import botocore.session
import pytest
import urllib3.response
from aiobotocore.eventstream import AioEventStream
from botocore import parsers
from botocore.eventstream import EventStream
from scripted_endpoint import ARRIVAL, SECRET, SHARD, ScriptedEndpoint, records

from kinesis_src.aws import FanOut, KinesisClient
from kinesis_src.aws import botocore_internals as internals
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.aws.botocore_internals import Internal
from kinesis_src.config import AwsSettings
from kinesis_src.errors import MalformedResponseError, RetriesExhaustedError, TruncatedResponseError
from kinesis_src.positions import Position
from kinesis_src.records import RecordPage, epoch_to_datetime
from kinesis_src.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
SERVED = records(300)  # ~40 KB a page: the plain cut and the Arrow decoder take it, not only the reference
CONSUMER = "arn:aws:kinesis:us-east-1:000000000000:stream/orders/consumer/billing:1"


@pytest.fixture
def absent(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``absent(*internals)``: those internals' checks answer 'missing' from now on; every check runs afresh."""
    monkeypatch.setattr(internals, "_found", {})

    def force(*which: Internal) -> None:
        monkeypatch.setattr(internals, "_found", {})
        for internal in which:
            monkeypatch.setitem(internals._CHECKS, internal, lambda _owner: False)

    return force


@pytest.fixture
def endpoint(dummy_credentials: None) -> Iterator[Callable[..., tuple[ScriptedEndpoint, AwsSettings]]]:
    made: list[ScriptedEndpoint] = []

    def start(**script: list[str]) -> tuple[ScriptedEndpoint, AwsSettings]:
        scripted = ScriptedEndpoint(SERVED, script)
        made.append(scripted)
        return scripted, AwsSettings(region="us-east-1", endpoint_url=scripted.url, retry=FAST)

    yield start
    for scripted in made:
        scripted.close()


def rows(page: RecordPage) -> tuple[Any, ...]:
    """Everything a reader gets from a page."""
    got = [(r.partition_key, r.data, r.sequence_number, r.approximate_arrival_timestamp) for r in page.records(SHARD)]
    return (got, page.encryption_types, page.next_iterator, page.millis_behind_latest, page.child_shards)


def served_rows(next_iterator: str | None) -> tuple[Any, ...]:
    arrivals = [epoch_to_datetime(ARRIVAL + i) for i in range(len(SERVED))]
    served = [(r.partition_key, r.data, r.sequence_number, at) for r, at in zip(SERVED, arrivals)]
    return served, [r.encryption for r in SERVED], next_iterator


def fell_back(caplog: pytest.LogCaptureFixture, internal: Internal) -> int:
    return sum(internal.value in r.getMessage() for r in caplog.records if r.name == internals.__name__)


def task_client(settings: AwsSettings, session: Any = None) -> KinesisClient:
    """A Spark task's client (kinesis_src.spark.tasks): bodies read in one read."""
    from kinesis_src.aws.whole_body import read_bodies_whole

    kinesis = KinesisClient(settings, session=session)
    read_bodies_whole(kinesis.botocore_client)
    return kinesis


def read(kinesis: KinesisClient) -> tuple[Any, ...]:
    return rows(kinesis.get_records("it-1", 10_000, SHARD, "orders"))


# -- the checks ----------------------------------------------------------------------------------


class _NoBody:
    def stream(self) -> Iterator[bytes]:
        yield from ()

    def close(self) -> None:
        pass


def todays_owners(dummy: None = None) -> dict[Internal, Any]:
    """For each internal, the real botocore/aiobotocore object the read path asks about."""
    client = botocore.session.get_session().create_client("kinesis", region_name="us-east-1",
                                                          endpoint_url="http://127.0.0.1:1")
    return {
        Internal.PARSE_SHAPE: parsers.JSONParser(),
        Internal.CLIENT_PARSER: client,
        Internal.PARSER_SETTINGS: botocore.session.get_session().get_component("response_parser_factory"),
        Internal.HTTP_SESSION: client,
        Internal.EVENT_MESSAGES: EventStream(_NoBody(), None, None, "SubscribeToShard"),
        Internal.AIO_EVENT_MESSAGES: AioEventStream(_NoBody(), None, None, "SubscribeToShard"),
    }


def test_todays_botocore_has_every_internal(dummy_credentials: None, absent: Callable[..., None]) -> None:
    """The fast paths are in use on the pinned botocore/aiobotocore: a check that failed would slow every read."""
    owners = todays_owners()
    assert set(owners) == set(Internal)
    assert {i: internals.present(i, owner) for i, owner in owners.items()} == dict.fromkeys(Internal, True)


async def _agen() -> Any:
    yield None


def _gen() -> Iterator[None]:
    yield None


class _OtherShape:
    def _parse_shape(self, node: Any) -> Any:  # one argument fewer than botocore's
        return node


MISSING = {
    "parser without _parse_shape": (Internal.PARSE_SHAPE, object()),
    "_parse_shape of another signature": (Internal.PARSE_SHAPE, _OtherShape()),
    "client without _endpoint": (Internal.CLIENT_PARSER, SimpleNamespace()),
    "endpoint without a parser factory": (Internal.CLIENT_PARSER, SimpleNamespace(_endpoint=SimpleNamespace())),
    "parser factory of another type": (Internal.CLIENT_PARSER,
                                       SimpleNamespace(_endpoint=SimpleNamespace(_response_parser_factory=object()))),
    "factory without _defaults": (Internal.PARSER_SETTINGS, object()),
    "_defaults not a dict": (Internal.PARSER_SETTINGS, SimpleNamespace(_defaults=[])),
    "client without _endpoint (session)": (Internal.HTTP_SESSION, SimpleNamespace()),
    "http_session without send": (Internal.HTTP_SESSION, SimpleNamespace(_endpoint=SimpleNamespace(http_session=1))),
    "stream without _event_generator": (Internal.EVENT_MESSAGES, SimpleNamespace(_parse_event=print)),
    "_event_generator not a generator": (Internal.EVENT_MESSAGES,
                                         SimpleNamespace(_event_generator=[], _parse_event=print)),
    "stream without _parse_event": (Internal.EVENT_MESSAGES, SimpleNamespace(_event_generator=_gen())),
    "aio stream with a sync generator": (Internal.AIO_EVENT_MESSAGES,
                                         SimpleNamespace(_event_generator=_gen(), _parse_event=print)),
}


@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_check_finds_its_internal_missing_or_of_another_shape(case: str, absent: Callable[..., None]) -> None:
    internal, owner = MISSING[case]
    assert internals.present(internal, owner) is False


def test_a_missing_internal_is_logged_once_naming_its_fallback(
    caplog: pytest.LogCaptureFixture, absent: Callable[..., None]
) -> None:
    caplog.set_level(logging.DEBUG, logger=internals.__name__)
    for _ in range(3):
        assert internals.present(Internal.EVENT_MESSAGES, SimpleNamespace()) is False
    logged = [r for r in caplog.records if r.name == internals.__name__]
    assert len(logged) == 1 and logged[0].levelno == logging.INFO
    assert Internal.EVENT_MESSAGES.value in logged[0].getMessage()
    assert internals.FALLBACKS[Internal.EVENT_MESSAGES] in logged[0].getMessage()
    assert set(internals.FALLBACKS) == set(Internal)


# -- PARSE_SHAPE: answers other than GetRecords parsed once ----------------------------------------


def _answers(kinesis: KinesisClient) -> tuple[Any, ...]:
    iterator = kinesis.get_shard_iterator("orders", SHARD, Position.trim_horizon())
    return kinesis.list_shards("orders"), kinesis.describe_stream("orders"), iterator, read(kinesis)


def test_answers_are_the_same_when_botocore_parses_them(endpoint, absent, caplog) -> None:
    caplog.set_level(logging.INFO, logger=internals.__name__)
    _, settings = endpoint()
    fast = _answers(KinesisClient(settings))
    assert fell_back(caplog, Internal.PARSE_SHAPE) == 0
    absent(Internal.PARSE_SHAPE)
    assert _answers(KinesisClient(settings)) == fast
    assert fell_back(caplog, Internal.PARSE_SHAPE) == 1
    assert fast[1].created == epoch_to_datetime(ARRIVAL) and fast[2] == "it-1"
    assert fast[3][:3] == served_rows("it-2")


@pytest.mark.parametrize("forced", [(), (Internal.PARSE_SHAPE,)], ids=["fast", "fallback"])
def test_the_guards_hold_when_botocore_parses_the_answers(endpoint, absent, forced) -> None:
    absent(*forced)
    scripted, settings = endpoint(ListShards=["truncate"], DescribeStreamSummary=["garbage"] * 9)
    kinesis = KinesisClient(settings)
    assert kinesis.list_shards("orders")[0]["ShardId"] == SHARD
    assert scripted.requests["ListShards"] == 2  # the cut body was retried, not parsed as no shards
    with pytest.raises(MalformedResponseError, match="DescribeStreamSummary"):
        kinesis.describe_stream("orders")


@pytest.mark.parametrize("forced", [(), (Internal.PARSE_SHAPE,)], ids=["fast", "fallback"])
def test_the_async_client_answers_the_same_when_botocore_parses_them(endpoint, absent, forced) -> None:
    absent(*forced)
    scripted, settings = endpoint(GetShardIterator=["truncate"], DescribeStreamSummary=["garbage"] * 9)

    async def run() -> tuple[str, tuple[Any, ...]]:
        async with AsyncKinesisClient(settings) as kinesis:
            iterator = await kinesis.get_shard_iterator("orders", SHARD, Position.trim_horizon())
            page = await kinesis.get_records(iterator, 10_000, SHARD, "orders")
            with pytest.raises(MalformedResponseError, match="DescribeStreamSummary"):
                await kinesis.describe_stream("orders")
            return iterator, rows(page)

    iterator, page = asyncio.run(run())
    assert iterator == "it-1" and scripted.requests["GetShardIterator"] == 2
    assert page[:3] == served_rows("it-2")


# -- CLIENT_PARSER / PARSER_SETTINGS: our parser on a client of a caller's session ------------------


CALLER = [(), (Internal.CLIENT_PARSER,), (Internal.CLIENT_PARSER, Internal.PARSER_SETTINGS)]


@pytest.mark.parametrize("forced", CALLER, ids=["fast", "no-client-parser", "no-settings-either"])
def test_a_callers_session_reads_the_same_records(endpoint, absent, caplog, forced) -> None:
    caplog.set_level(logging.INFO, logger=internals.__name__)
    absent(*forced)
    scripted, settings = endpoint(GetRecords=["ok", "end", "truncate", "ok", "malformed"])
    kinesis = KinesisClient(settings, session=botocore.session.get_session())
    assert read(kinesis)[:3] == served_rows("it-2")
    ended = read(kinesis)
    assert ended[:3] == served_rows(None) and ended[4][0].parent_shards == (SHARD,)
    assert read(kinesis)[0] == served_rows(None)[0]  # after a cut body: retried, not an empty page
    assert scripted.requests["GetRecords"] == 4
    with pytest.raises(MalformedResponseError) as info:
        read(kinesis)
    assert SHARD in str(info.value) and SECRET not in "".join(traceback.format_exception(info.value))
    assert fell_back(caplog, Internal.CLIENT_PARSER) == (Internal.CLIENT_PARSER in forced)


@pytest.mark.parametrize("forced", CALLER, ids=["fast", "no-client-parser", "no-settings-either"])
def test_a_callers_session_names_a_body_that_is_not_json(endpoint, absent, forced) -> None:
    absent(*forced)
    _, settings = endpoint(GetRecords=["garbage"] * 9, ListShards=["garbage"] * 9)
    kinesis = KinesisClient(settings, session=botocore.session.get_session())
    with pytest.raises(MalformedResponseError, match="GetRecords"):
        read(kinesis)
    with pytest.raises(MalformedResponseError, match="ListShards"):
        kinesis.list_shards("orders")


def test_a_callers_parser_settings_carry_over_only_while_readable(endpoint, absent) -> None:
    """What losing PARSER_SETTINGS costs: botocore's default timestamps instead of the caller's parser."""
    _, settings = endpoint()

    def created() -> Any:
        session = botocore.session.get_session()
        session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=lambda v: ("theirs", v))
        return KinesisClient(settings, session=session).describe_stream("orders").created

    assert created() == ("theirs", ARRIVAL)
    absent(Internal.PARSER_SETTINGS)
    assert created() == epoch_to_datetime(ARRIVAL)


# -- CLIENT_PARSER and HTTP_SESSION on a Spark task's client -------------------------------------------


def _streamed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    streamed: list[int] = []
    chunks = urllib3.response.HTTPResponse.stream

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        streamed.append(1)
        return chunks(self, *args, **kwargs)

    monkeypatch.setattr(urllib3.response.HTTPResponse, "stream", counting)
    return streamed


@pytest.mark.parametrize("forced", [(), (Internal.CLIENT_PARSER,), (Internal.HTTP_SESSION,)],
                         ids=["fast", "no-client-parser", "no-http-session"])
def test_a_task_client_reads_the_same_records(endpoint, absent, monkeypatch, forced) -> None:
    absent(*forced)
    scripted, settings = endpoint(GetRecords=["ok", "end", "truncate"])
    kinesis = task_client(settings)
    streamed = _streamed(monkeypatch)
    assert read(kinesis)[:3] == served_rows("it-2")
    assert read(kinesis)[:3] == served_rows(None)
    assert read(kinesis)[0] == served_rows(None)[0] and scripted.requests["GetRecords"] == 4
    assert bool(streamed) == (Internal.HTTP_SESSION in forced)  # botocore's chunked read only without the session


def test_a_task_client_on_every_fallback_still_retries_a_cut_body(endpoint, absent) -> None:
    absent(Internal.HTTP_SESSION, Internal.CLIENT_PARSER, Internal.PARSE_SHAPE)
    _, settings = endpoint(GetRecords=["truncate"] * 9)
    with pytest.raises(RetriesExhaustedError) as info:
        read(task_client(settings))
    assert isinstance(info.value.last_error, TruncatedResponseError)


# -- EVENT_MESSAGES / AIO_EVENT_MESSAGES: SubscribeToShard's events ------------------------------


def _event_rows(events: list[Any]) -> list[tuple[Any, ...]]:
    return [(rows(e.page), e.continuation_sequence_number, e.shard_ended) for e in events]


def subscribe(settings: AwsSettings) -> list[tuple[Any, ...]]:
    fanout = FanOut(KinesisClient(settings))
    return _event_rows(list(fanout.subscribe(CONSUMER, SHARD, Position.trim_horizon())))


def asubscribe(settings: AwsSettings) -> list[tuple[Any, ...]]:
    async def run() -> list[Any]:
        async with AsyncKinesisClient(settings) as kinesis:
            return [e async for e in kinesis.fan_out().subscribe(CONSUMER, SHARD, Position.trim_horizon())]

    return _event_rows(asyncio.run(run()))


SUBSCRIBERS = {"sync": (subscribe, Internal.EVENT_MESSAGES), "async": (asubscribe, Internal.AIO_EVENT_MESSAGES)}


@pytest.mark.parametrize("kind", sorted(SUBSCRIBERS))
def test_subscribe_gives_the_same_events_through_botocores_public_iteration(endpoint, absent, caplog, kind) -> None:
    caplog.set_level(logging.INFO, logger=internals.__name__)
    subscriber, internal = SUBSCRIBERS[kind]
    _, settings = endpoint()
    fast = subscriber(settings)
    absent(internal)
    assert subscriber(settings) == fast
    assert fell_back(caplog, internal) == 1
    half = len(SERVED) // 2
    assert [len(e[0][0]) for e in fast] == [half, len(SERVED) - half]
    assert [row for e in fast for row in e[0][0]] == served_rows(None)[0]
    assert [e[1:] for e in fast] == [(SERVED[half - 1].sequence_number, False), (None, True)]


@pytest.mark.parametrize("code", ["ResourceNotFoundException", "InternalFailureException", "SomeFutureException"])
@pytest.mark.parametrize("kind", sorted(SUBSCRIBERS))
def test_an_error_on_the_event_stream_maps_the_same_through_the_fallback(endpoint, absent, kind, code) -> None:
    subscriber, internal = SUBSCRIBERS[kind]
    _, settings = endpoint(SubscribeToShard=["error:" + code] * 2)
    with pytest.raises(Exception) as fast:
        subscriber(settings)
    absent(internal)
    with pytest.raises(Exception) as fallback:
        subscriber(settings)
    assert type(fallback.value) is type(fast.value)
    assert getattr(fallback.value, "retriable", None) == getattr(fast.value, "retriable", None)


class RenamedEventStream(EventStream):
    """botocore's EventStream as a release that renamed its private members would have it."""

    _event_generator = property(lambda self: _renamed())  # type: ignore[assignment]
    _parse_event = property(lambda self: _renamed())  # type: ignore[assignment]

    def __init__(self, raw_stream: Any, output_shape: Any, parser: Any, operation_name: str) -> None:
        self._raw_stream, self._output_shape = raw_stream, output_shape
        self._operation_name, self._parser = operation_name, parser
        self._messages = self._create_raw_event_generator()

    def __iter__(self) -> Iterator[Any]:
        for message in self._messages:
            parsed = EventStream._parse_event(self, message)
            if parsed:
                yield parsed

    def get_initial_response(self) -> Any:
        return next(self._messages)


def _renamed() -> Any:
    raise AttributeError("renamed in this botocore")


def test_a_botocore_that_renamed_the_event_stream_internals_still_delivers_every_event(
    endpoint, absent, monkeypatch
) -> None:
    _, settings = endpoint()
    fast = subscribe(settings)
    monkeypatch.setattr(botocore.parsers, "EventStream", RenamedEventStream)
    absent()  # a fresh process: the check runs on the renamed stream
    assert subscribe(settings) == fast
