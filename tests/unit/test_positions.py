"""Positions: parsing user input, iterator arguments, stable serialization."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

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
