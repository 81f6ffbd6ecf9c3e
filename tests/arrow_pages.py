"""What the Arrow-decoder tests share: both decoders on one body, and what each makes of it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from kinesis_src.arrow import page_to_arrow
from kinesis_src.aws import arrow_decode
from kinesis_src.aws.arrow_decode import decode_get_records_arrow
from kinesis_src.aws.decode import decode_get_records
from kinesis_src.errors import MalformedResponseError
from kinesis_src.records import RecordPage

SHARD = "shardId-000000000003"


@pytest.fixture
def every_body_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small bodies normally take the reference path; with this every body tries the Arrow path."""
    monkeypatch.setattr(arrow_decode, "SMALL_BODY", 0)


def page_fields(page: RecordPage) -> dict:
    return {f.name: getattr(page, f.name) for f in fields(RecordPage)}


def assert_same(body: bytes) -> RecordPage:
    """Both decoders give equal pages and equal Arrow batches; the Arrow decoder's page."""
    reference = decode_get_records(body)
    ours = decode_get_records_arrow(body)
    assert page_fields(ours) == page_fields(reference)
    batch = page_to_arrow(ours, "orders", SHARD)
    assert batch.equals(page_to_arrow(reference, "orders", SHARD))
    assert batch.schema == page_to_arrow(reference, "orders", SHARD).schema
    return ours


def outcome(decode, body: bytes) -> tuple[str, object]:
    try:
        return "page", page_fields(decode(body))
    except MalformedResponseError as exc:
        return "error", str(exc)
