"""Every way a user names a start position, at each place that reads one.

The Consumer (``initial_position``), Spark (``initialPosition`` +
``startingTimestamp``, and the awslabs ``kinesis.startingPosition``), the CLI
(``read --from``), ``read_table``'s window bounds and ``Position.parse`` share
one parser; each accepts its own set of spellings. These tables pin which
spellings each place accepts, what they mean, and which it refuses with an
error naming the option or argument.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.cli import app
from kinesis_src.consumer.consumer_config import parse_initial_position
from kinesis_src.errors import ConfigurationError, InvalidPositionError
from kinesis_src.positions import Position, PositionKind, parse_timestamp
from kinesis_src.spark.options import parse_options
from kinesis_src.window import resolve_window

TH, LATEST, AT = PositionKind.TRIM_HORIZON, PositionKind.LATEST, PositionKind.AT_TIMESTAMP
ISO = "2026-01-31T12:00:00Z"
ISO_AT = datetime(2026, 1, 31, 12, tzinfo=UTC)
EPOCH = "1700000000"
EPOCH_AT = datetime.fromtimestamp(1_700_000_000, UTC)
NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
NAIVE = datetime(2026, 1, 31, 12)
PAST_9999 = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1)))  # UTC is in year 10000


def _spark(batch: bool | None = False, **options: str) -> Position:
    parsed = parse_options({"streamName": "orders", "region": "us-east-1", **options}, batch=batch, environ={})
    return parsed.initial_position


def _cli(start: str, monkeypatch: pytest.MonkeyPatch) -> Position:
    """``kinesis-src read STREAM --from START``, stopped where the read would begin."""
    seen: list[Position] = []
    monkeypatch.setattr(app, "read_command", lambda kinesis, stream, position, *rest: seen.append(position) or 0)
    assert app.main(["--region", "us-east-1", "read", "orders", "--from", start]) == 0
    return seen[0]


def _cli_refusal(start: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        assert app.main(["--region", "us-east-1", "read", "orders", "--from", start]) == 2
    return err.getvalue()


# -- Position.parse: keywords only; at_timestamp takes its timestamp apart ---------------------------


@pytest.mark.parametrize(
    "text, kind",
    [("trim_horizon", TH), ("TRIM_HORIZON", TH), ("earliest", TH), (" Earliest ", TH), ("latest", LATEST),
     ("LATEST\n", LATEST)],
)
def test_position_parse_accepts_the_keywords_in_any_case(text: str, kind: PositionKind) -> None:
    assert Position.parse(text) == Position(kind)


@pytest.mark.parametrize("timestamp, at", [(ISO, ISO_AT), (EPOCH, EPOCH_AT), ("2026-01-31T13:00:00+01:00", ISO_AT)])
def test_position_parse_at_timestamp_takes_the_timestamp_apart(timestamp: str, at: datetime) -> None:
    assert Position.parse("AT_TIMESTAMP", timestamp) == Position.at_timestamp(at)


@pytest.mark.parametrize("text", [ISO, EPOCH, "oldest", "", "at_timestamp " + ISO, "latest now", "trim horizon"])
def test_position_parse_refuses_anything_else_listing_the_keywords(text: str) -> None:
    with pytest.raises(InvalidPositionError, match="expected one of latest, trim_horizon, earliest, at_timestamp"):
        Position.parse(text)


def test_position_parse_at_timestamp_without_one_names_the_option() -> None:
    with pytest.raises(InvalidPositionError, match="needs a timestamp.*startingTimestamp.*ISO-8601"):
        Position.parse("at_timestamp")


# -- the Consumer's initial_position: keywords, timestamps, datetimes, Positions ----------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("trim_horizon", Position.trim_horizon()),
        ("EARLIEST", Position.trim_horizon()),
        (" latest ", Position.latest()),
        (ISO, Position.at_timestamp(ISO_AT)),
        (EPOCH, Position.at_timestamp(EPOCH_AT)),
        ("2026-01-31T12:00:00", Position.at_timestamp(ISO_AT)),  # no offset: UTC
        (ISO_AT, Position.at_timestamp(ISO_AT)),
        (NAIVE, Position.at_timestamp(ISO_AT)),  # a naive datetime is UTC here
        (Position.latest(), Position.latest()),
        (Position.at_timestamp(ISO_AT), Position.at_timestamp(ISO_AT)),
    ],
)
def test_consumer_accepts(value: Any, expected: Position) -> None:
    assert parse_initial_position(value) == expected


@pytest.mark.parametrize("value", ["at_timestamp", "at_timestamp " + ISO, "yesterday", "", "latest now"])
def test_consumer_refuses_text_naming_initial_position_and_the_forms(value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_initial_position(value)
    message = str(info.value)
    assert message.startswith(f"initial_position {value!r} is not valid")
    assert "'trim_horizon', 'latest', or an ISO-8601 timestamp" in message


@pytest.mark.parametrize("value", [1700000000, 1.5, None, b"latest"])
def test_consumer_refuses_other_types_naming_them(value: object) -> None:
    with pytest.raises(ConfigurationError, match="initial_position must be a string, datetime or Position, got"):
        parse_initial_position(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [Position.after_sequence("1"), Position.at_sequence("1")])
def test_consumer_refuses_sequence_positions(value: Position) -> None:
    with pytest.raises(ConfigurationError, match="initial_position is where a new application starts"):
        parse_initial_position(value)


# -- Spark: initialPosition keywords, startingTimestamp apart ------------------------------------------


@pytest.mark.parametrize(
    "options, batch, expected",
    [
        ({}, False, Position.latest()),
        ({}, None, Position.latest()),
        ({}, True, Position.trim_horizon()),
        ({"initialPosition": "Earliest"}, False, Position.trim_horizon()),
        ({"initialPosition": "TRIM_HORIZON"}, True, Position.trim_horizon()),
        ({"initialPosition": "LATEST"}, False, Position.latest()),
        ({"initialPosition": "at_timestamp", "startingTimestamp": ISO}, False, Position.at_timestamp(ISO_AT)),
        ({"initialPosition": "AT_TIMESTAMP", "startingTimestamp": EPOCH}, True, Position.at_timestamp(EPOCH_AT)),
    ],
)
def test_spark_accepts(options: dict[str, str], batch: bool | None, expected: Position) -> None:
    assert _spark(batch, **options) == expected


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"initialPosition": ISO}, "option 'initialPosition' = '2026-01-31T12:00:00Z'; accepted values: "
                                   "latest, trim_horizon, earliest, at_timestamp"),
        ({"initialPosition": "at_timestamp " + ISO}, "accepted values: latest, trim_horizon, earliest, at_timestamp"),
        ({"initialPosition": "oldest", "startingTimestamp": "yesterday"}, "option 'initialPosition' = 'oldest'"),
        ({"initialPosition": "at_timestamp"}, "'at_timestamp' needs option 'startingTimestamp'"),
        ({"initialPosition": "at_timestamp", "startingTimestamp": "yesterday"}, "option 'startingTimestamp': "),
        ({"initialPosition": "latest", "startingTimestamp": "yesterday"}, "option 'startingTimestamp': "),
        ({"startingTimestamp": ISO}, "option 'startingTimestamp' needs option 'initialPosition' = 'at_timestamp'"),
        ({"initialPosition": "earliest", "startingTimestamp": ISO}, "needs option 'initialPosition' = 'at_timestamp'"),
        ({"initialPosition": '{"at_timestamp": "06/25/2020 10:23:45 PDT"}'}, "Databricks' JSON form is not accepted"),
    ],
)
def test_spark_refuses_naming_the_option(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _spark(False, **options)
    assert fragment in str(info.value)


# -- Spark: the awslabs connector's kinesis.startingPosition ------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("LATEST", Position.latest()),
        ("trim_horizon", Position.trim_horizon()),
        ("Earliest", Position.trim_horizon()),
        ("AT_TIMESTAMP " + ISO, Position.at_timestamp(ISO_AT)),
        ("at_timestamp   2026-01-31T13:00:00+01:00", Position.at_timestamp(ISO_AT)),
        ("AT_TIMESTAMP " + EPOCH, Position.at_timestamp(EPOCH_AT)),
    ],
)
def test_awslabs_starting_position_accepts(value: str, expected: Position) -> None:
    assert _spark(False, **{"kinesis.startingPosition": value}) == expected


@pytest.mark.parametrize(
    "value", ["AT_SEQUENCE_NUMBER 123", "AT_TIMESTAMP", "AT_TIMESTAMP yesterday", "NOW", ISO, "LATEST now"]
)
def test_awslabs_starting_position_refuses_naming_the_option_and_ours(value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _spark(False, **{"kinesis.startingPosition": value})
    message = str(info.value)
    assert "option 'kinesis.startingPosition'" in message and "initialPosition" in message
    assert "startingTimestamp" in message


@pytest.mark.parametrize(
    "theirs, ours, agree",
    [
        ("LATEST", {"initialPosition": "latest"}, True),
        ("EARLIEST", {"initialPosition": "trim_horizon"}, True),  # keywords are compared by the position they name
        ("EARLIEST", {"initialPosition": "latest"}, False),
        ("AT_TIMESTAMP " + ISO, {"initialPosition": "at_timestamp", "startingTimestamp": "2026-01-31T13:00:00+01:00"},
         True),  # timestamps are compared as instants
        ("AT_TIMESTAMP " + ISO, {"initialPosition": "at_timestamp", "startingTimestamp": "2026-01-31T12:00:01Z"},
         False),
    ],
)
def test_awslabs_and_our_options_must_agree(theirs: str, ours: dict[str, str], agree: bool) -> None:
    options = {"kinesis.startingPosition": theirs, **ours}
    if agree:
        expected = {"LATEST": Position.latest(), "EARLIEST": Position.trim_horizon()}.get(theirs, Position.at_timestamp(ISO_AT))
        assert _spark(False, **options) == expected
        return
    with pytest.raises(ConfigurationError, match="'kinesis.startingPosition'.*disagree"):
        _spark(False, **options)


# -- the CLI: read --from ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, expected",
    [
        ("trim_horizon", Position.trim_horizon()),
        ("EARLIEST", Position.trim_horizon()),
        ("latest", Position.latest()),
        (ISO, Position.at_timestamp(ISO_AT)),
        ("2026-01-31T12:00:00", Position.at_timestamp(ISO_AT)),
        (EPOCH, Position.at_timestamp(EPOCH_AT)),
    ],
)
def test_cli_from_accepts(start: str, expected: Position, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _cli(start, monkeypatch) == expected


@pytest.mark.parametrize("start", ["at_timestamp", "yesterday", "latest now", "at_timestamp " + ISO])
def test_cli_from_refuses_with_status_2_naming_the_forms(start: str) -> None:
    message = _cli_refusal(start)
    assert message.startswith("kinesis-src: ") and repr(start) in message
    assert "ISO-8601" in message and "epoch seconds" in message


def test_cli_default_start_is_the_trim_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Position] = []
    monkeypatch.setattr(app, "read_command", lambda kinesis, stream, position, *rest: seen.append(position) or 0)
    assert app.main(["--region", "us-east-1", "read", "orders"]) == 0
    assert seen == [Position.trim_horizon()]


# -- read_table / export: window bounds ----------------------------------------------------------------


@pytest.mark.parametrize(
    "start, lo",
    [("trim_horizon", None), (" EARLIEST", None), ("Latest", NOW), (ISO, ISO_AT), (EPOCH, EPOCH_AT),
     ("2026-01-31T12:00:00", ISO_AT), (ISO_AT.astimezone(timezone(timedelta(hours=3))), ISO_AT)],
)
def test_window_start_accepts(start: Any, lo: datetime | None) -> None:
    assert resolve_window(start, NOW, NOW).start == lo


@pytest.mark.parametrize("end, hi", [("latest", NOW), ("2026-03-01T12:00:00Z", datetime(2026, 3, 1, 12, tzinfo=UTC))])
def test_window_end_accepts(end: Any, hi: datetime) -> None:
    assert resolve_window(ISO, end, NOW).end == hi


@pytest.mark.parametrize("arg", ["start", "end"])
@pytest.mark.parametrize("value", ["at_timestamp", "at_timestamp " + ISO, "yesterday", 1700000000, None])
def test_window_refuses_naming_the_argument(arg: str, value: object) -> None:
    bounds: dict[str, object] = {"start": "trim_horizon", "end": "latest", arg: value}
    with pytest.raises(InvalidPositionError) as info:
        resolve_window(now=NOW, **bounds)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith(f"{arg}={value!r}") and "ISO-8601" in message and "aware datetime" in message


@pytest.mark.parametrize("arg", ["start", "end"])
def test_window_refuses_naive_datetimes(arg: str) -> None:
    bounds: dict[str, object] = {"start": "trim_horizon", "end": "latest", arg: NAIVE}
    with pytest.raises(InvalidPositionError, match=f"{arg}=.* is a naive datetime"):
        resolve_window(now=NOW, **bounds)  # type: ignore[arg-type]


@pytest.mark.parametrize("word", ["trim_horizon", "EARLIEST"])
def test_window_end_refuses_the_trim_horizon(word: str) -> None:
    with pytest.raises(InvalidPositionError, match=f"end={word!r}: a window cannot end at the trim horizon"):
        resolve_window("trim_horizon", word, NOW)


@pytest.mark.parametrize("arg", ["start", "end"])
def test_window_refuses_an_aware_datetime_past_year_9999_naming_the_argument(arg: str) -> None:
    bounds: dict[str, object] = {"start": "trim_horizon", "end": PAST_9999, arg: PAST_9999}
    with pytest.raises(InvalidPositionError) as info:
        resolve_window(now=NOW, **bounds)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"{arg}={PAST_9999!r}")


# -- one timestamp reading everywhere ------------------------------------------------------------------

_OFFSETS = st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=-59),
                                             max_value=timedelta(hours=23, minutes=59)))
_TIMESTAMP_TEXT = st.one_of(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31),
                 timezones=st.one_of(st.none(), _OFFSETS)).map(lambda d: d.isoformat()),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31)).map(
        lambda d: d.isoformat(timespec="milliseconds") + "Z"),
    st.integers(min_value=0, max_value=253402300799).map(str),
    st.from_regex(r"\A[0-9]{1,5}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})?\Z"),
    st.text(max_size=12),
)


def _instant_or_refused(read: Any) -> datetime | None:
    try:
        return read()
    except ConfigurationError:  # InvalidPositionError is one
        return None


@settings(max_examples=150)
@given(text=_TIMESTAMP_TEXT)
@example(text="1e20")
@example(text="9999-12-31T23:59:59-01:00")
@example(text="2026-01-31")
def test_every_place_reads_a_timestamp_as_parse_timestamp_does(text: str) -> None:
    """Same instant or refused, at every place that takes a timestamp in text."""
    expected = _instant_or_refused(lambda: parse_timestamp(text))
    if text.strip().lower() in ("latest", "trim_horizon", "earliest", "at_timestamp", ""):
        return
    assert _instant_or_refused(lambda: parse_initial_position(text).timestamp) == expected
    assert _instant_or_refused(lambda: Position.parse("at_timestamp", text).timestamp) == expected
    assert _instant_or_refused(lambda: resolve_window(text, "9999-12-31T23:59:59Z", NOW).start) == expected
    assert _instant_or_refused(lambda: resolve_window("trim_horizon", text, NOW).end) == expected


@settings(max_examples=100)
@given(word=st.sampled_from(["trim_horizon", "earliest", "latest"]), flips=st.lists(st.booleans(), min_size=12,
                                                                                     max_size=12))
def test_keywords_are_case_blind_everywhere(word: str, flips: list[bool]) -> None:
    spelt = "".join(c.upper() if flip else c for c, flip in zip(word, flips)) + word[len(flips):]
    kind = LATEST if word == "latest" else TH
    assert Position.parse(spelt).kind is kind
    assert parse_initial_position(spelt).kind is kind
    assert _spark(False, initialPosition=spelt).kind is kind
    assert _spark(False, **{"kinesis.startingPosition": spelt}).kind is kind
    lo = resolve_window(spelt, "latest", NOW).start
    assert lo == (NOW if kind is LATEST else None)
