"""Positions: parsing user input, iterator arguments, stable serialization."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.errors import InvalidPositionError
from kinesis_src.positions import Position, PositionKind, parse_timestamp


@pytest.mark.parametrize(
    "text, kind",
    [("trim_horizon", PositionKind.TRIM_HORIZON), ("EARLIEST", PositionKind.TRIM_HORIZON), (" latest ", PositionKind.LATEST)],
)
def test_keywords(text: str, kind: PositionKind) -> None:
    assert Position.parse(text).kind is kind


def test_at_timestamp_needs_and_parses_a_timestamp() -> None:
    pos = Position.parse("at_timestamp", "2026-01-31T12:00:00.250+01:00")
    assert pos.timestamp == datetime(2026, 1, 31, 11, 0, 0, 250000, tzinfo=timezone.utc)
    assert pos.iterator_args() == {"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": pos.timestamp}
    with pytest.raises(InvalidPositionError, match="startingTimestamp"):
        Position.parse("at_timestamp")


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", "nan", "-5", ""])
def test_malformed_timestamps_name_the_value_and_the_format(bad: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        parse_timestamp(bad)
    assert repr(bad) in str(info.value) or bad in str(info.value)
    assert "ISO-8601" in str(info.value) or "epoch" in str(info.value)


def test_naive_means_utc_and_epoch_is_accepted() -> None:
    assert parse_timestamp("2026-01-01T00:00:00") == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_timestamp(0) == datetime(1970, 1, 1, tzinfo=timezone.utc)
    local = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert parse_timestamp(local) == datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_unknown_keyword_lists_accepted_values() -> None:
    with pytest.raises(InvalidPositionError, match="latest, trim_horizon, earliest, at_timestamp"):
        Position.parse("oldest")


def test_sequence_positions_validate_the_number() -> None:
    assert Position.after_sequence("123").iterator_args() == {
        "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
        "StartingSequenceNumber": "123",
    }
    for bad in ["12a", "", "1" * 129]:
        with pytest.raises(InvalidPositionError, match="sequence number"):
            Position.at_sequence(bad)
    with pytest.raises(InvalidPositionError):
        Position(PositionKind.LATEST, sequence_number="1")


@pytest.mark.parametrize(
    "pos",
    [Position.trim_horizon(), Position.latest(), Position.after_sequence("4959"), Position.at_timestamp("2026-05-01T10:11:12.123456Z")],
)
def test_dict_round_trip_is_exact(pos: Position) -> None:
    assert Position.from_dict(pos.to_dict()) == pos
    assert list(pos.to_dict())[0] == "kind"


def test_from_dict_rejects_garbage() -> None:
    with pytest.raises(InvalidPositionError, match="kind"):
        Position.from_dict({"kind": "SOMEWHERE"})


# -- out-of-range input: always InvalidPositionError, never a raw OverflowError/ValueError ------------

OUT_OF_RANGE = [
    "1e20",  # epoch seconds past datetime's range: OverflowError from fromtimestamp
    "1e12",  # year 33658: ValueError from fromtimestamp
    "99999-01-01T00:00:00Z",
    "9999-12-31T23:59:59-01:00",  # valid text, but UTC is in year 10000: OverflowError from astimezone
    "0001-01-01T00:00:00+01:00",  # UTC is in year 0
]


@pytest.mark.parametrize("bad", OUT_OF_RANGE)
def test_out_of_range_text_names_the_value_and_the_accepted_forms(bad: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        parse_timestamp(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert "ISO-8601" in message and "epoch seconds" in message


@pytest.mark.parametrize("bad", [1e20, 1e12, pytest.param(10**400, id="10**400"), float("inf"), -1])
def test_out_of_range_numbers_raise_invalid_position(bad: float) -> None:
    with pytest.raises(InvalidPositionError, match="epoch seconds"):
        parse_timestamp(bad)


def test_out_of_range_datetime_raises_invalid_position() -> None:
    edge = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1)))
    with pytest.raises(InvalidPositionError, match="9999-12-31"):
        parse_timestamp(edge)


def _fixed_offsets() -> st.SearchStrategy[timezone]:
    return st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)))


_ANY_INPUT = st.one_of(
    st.text(),
    st.from_regex(r"\A[0-9]{1,6}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2})?\Z"),
    st.floats(),
    st.integers(),
    st.floats().map(repr),
    st.integers().map(str),
    st.datetimes(timezones=st.one_of(st.none(), _fixed_offsets())),
)


@settings(max_examples=300)
@given(value=_ANY_INPUT)
@example(value="1e20")
@example(value=1e20)
@example(value="9999-12-31T23:59:59-01:00")
@example(value=10**400)
def test_parse_timestamp_returns_utc_or_raises_invalid_position(value: object) -> None:
    """The only outcomes a caller must handle: an aware UTC datetime, or InvalidPositionError."""
    try:
        parsed = parse_timestamp(value)  # type: ignore[arg-type]
    except InvalidPositionError:
        return
    assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0)


def test_a_position_inside_an_aggregate_reads_at_its_record_and_round_trips() -> None:
    inside = Position.after_sequence("42", 3)
    assert inside.inside_record and not Position.after_sequence("42").inside_record
    assert inside.iterator_args() == {"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": "42"}
    assert inside.to_dict() == {"kind": "AFTER_SEQUENCE_NUMBER", "sequenceNumber": "42", "subSequenceNumber": 3}
    assert Position.from_dict(inside.to_dict()) == inside
    assert Position.from_dict(Position.after_sequence("42").to_dict()) == Position.after_sequence("42")
    assert str(inside) == "AFTER_SEQUENCE_NUMBER 42/3"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Position(PositionKind.AT_SEQUENCE_NUMBER, "42", sub_sequence_number=1),
        lambda: Position.after_sequence("42", -1),
        lambda: Position.from_dict({"kind": "AFTER_SEQUENCE_NUMBER", "sequenceNumber": "42", "subSequenceNumber": "1"}),
    ],
)
def test_a_sub_sequence_number_needs_an_after_position_and_a_non_negative_integer(make) -> None:
    with pytest.raises(InvalidPositionError, match="sub-sequence number"):
        make()
