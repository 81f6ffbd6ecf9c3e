"""Stream identity: a recreated or renamed stream is told apart from the one a checkpoint was made for."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kinesis_src.errors import StreamRecreatedError
from kinesis_src.identity import StreamIdentity, check_same_stream

ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
T0 = datetime(2026, 11, 1, 12, 0, 0, 123000, tzinfo=timezone.utc)


def test_round_trip_through_json_keeps_identity() -> None:
    identity = StreamIdentity(ARN, T0)
    again = StreamIdentity.from_dict(identity.to_dict())
    check_same_stream(identity, again, "checkpoint", "start fresh")
    assert again.name == "orders"


def test_recreated_stream_is_refused_naming_both_creation_times() -> None:
    old, new = StreamIdentity(ARN, T0), StreamIdentity(ARN, T0 + timedelta(days=3))
    with pytest.raises(StreamRecreatedError) as info:
        check_same_stream(old, new, "checkpoint /tmp/cp", "Use a new checkpointLocation.")
    message = str(info.value)
    assert "deleted and created again" in message and "2026-11-01T12:00:00" in message
    assert "2026-11-04T12:00:00" in message and "Use a new checkpointLocation." in message


def test_renamed_stream_is_refused_naming_both_names() -> None:
    old = StreamIdentity(ARN, T0)
    new = StreamIdentity(ARN.replace("orders", "payments"), T0)
    with pytest.raises(StreamRecreatedError, match="'orders'.*'payments'.*streamName changed"):
        check_same_stream(old, new, "checkpoint", "start fresh")
