"""``batch.records`` / ``RecordPage.records``: the Record objects the Consumer hands out, built column-wise.

The fast path (one ``map`` over the columns) must give exactly the records a
row-by-row construction gives, for every column variant a page can have:
missing partition keys and arrival times, KPL sub-sequence numbers and
explicit hash keys.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
from datetime import UTC, datetime

import pytest

from kinesis_src.aws.decode import decode_get_records
from kinesis_src.errors import MalformedResponseError
from kinesis_src.records import Record, RecordPage, build_records, gc_paused

SHARD = "shardId-000000000007"


def page(n: int, *, aggregated: bool = False, gaps: bool = False) -> RecordPage:
    return RecordPage(
        partition_keys=[None if gaps and i % 3 == 0 else f"pk-{i}" for i in range(n)],
        data=[bytes([i % 256]) * (i % 5) for i in range(n)],
        sequence_numbers=[str(10**20 + i) for i in range(n)],
        arrival_epoch=[None if gaps and i % 4 == 1 else 1.7e9 + i / 1000 + 0.0005 for i in range(n)],
        encryption_types=[None] * n,
        next_iterator="it",
        millis_behind_latest=0,
        sub_sequence_numbers=[i % 3 for i in range(n)] if aggregated else None,
        explicit_hash_keys=[str(i) if i % 2 else None for i in range(n)] if aggregated else None,
    )


def row_by_row(p: RecordPage, shard_id: str) -> list[Record]:
    """The reference: one record per row, each field as documented on Record."""
    out = []
    for i in range(len(p)):
        ts = p.arrival_epoch[i]
        out.append(Record(
            partition_key=p.partition_keys[i] if p.partition_keys[i] is not None else "",
            data=p.data[i],
            sequence_number=p.sequence_numbers[i],
            sub_sequence_number=p.sub_sequence_numbers[i] if p.sub_sequence_numbers is not None else 0,
            shard_id=shard_id,
            approximate_arrival_timestamp=None if ts is None else datetime.fromtimestamp(ts, UTC),
            explicit_hash_key=p.explicit_hash_keys[i] if p.explicit_hash_keys is not None else None,
        ))
    return out


@pytest.mark.parametrize("aggregated", [False, True])
@pytest.mark.parametrize("gaps", [False, True])
def test_records_match_a_row_by_row_construction(aggregated: bool, gaps: bool) -> None:
    p = page(50, aggregated=aggregated, gaps=gaps)
    got = p.records(SHARD)
    assert list(got) == row_by_row(p, SHARD)
    assert all(type(r) is Record for r in got)


def test_an_empty_page_has_no_records() -> None:
    assert list(page(0).records(SHARD)) == []


def test_arrival_times_are_utc_datetimes_to_the_microsecond() -> None:
    (record,) = page(1).records(SHARD)
    assert record.approximate_arrival_timestamp == datetime(2023, 11, 14, 22, 13, 20, 500, tzinfo=UTC)


def test_records_name_the_stream_they_were_read_from() -> None:
    records = page(3, aggregated=False).records("shardId-000000000001", "orders")
    assert [r.stream for r in records] == ["orders"] * 3
    assert records[0].shard_id == "shardId-000000000001"


# -- the public behaviour of Record, pinned: RecordPage.records builds them without calling __init__ ------


def built_and_constructed() -> tuple[Record, Record]:
    p = page(2, aggregated=True)
    built = p.records(SHARD, "orders")[1]
    (reference,) = row_by_row(p.slice(2, 1), SHARD)
    return built, dataclasses.replace(reference, stream="orders")


def test_a_built_record_equals_hashes_and_prints_as_a_constructed_one() -> None:
    built, constructed = built_and_constructed()
    assert built == constructed
    assert hash(built) == hash(constructed)
    assert repr(built) == repr(constructed)
    assert repr(built).startswith("Record(partition_key='pk-1', data=b'\\x01', sequence_number='100000000000000000001'")
    assert built != dataclasses.replace(constructed, data=b"other")


def test_a_built_record_is_immutable_and_has_no_instance_dict() -> None:
    built, _ = built_and_constructed()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.data = b"x"  # type: ignore[misc]
    assert not hasattr(built, "__dict__")


def test_a_built_record_pickles_and_works_with_dataclass_helpers() -> None:
    built, constructed = built_and_constructed()
    assert pickle.loads(pickle.dumps(built)) == constructed
    assert dataclasses.asdict(built) == dataclasses.asdict(constructed)
    assert dataclasses.replace(built, sub_sequence_number=5).sub_sequence_number == 5
    assert copy.copy(built) == constructed


def test_every_field_of_record_is_set_by_the_column_wise_build() -> None:
    """A field added to Record without a column would be left unset (AttributeError on read);
    a __post_init__ would be skipped. Either needs RecordPage.records changed with it."""
    assert not hasattr(Record, "__post_init__")
    assert Record.__slots__ == tuple(f.name for f in dataclasses.fields(Record))
    built, _ = built_and_constructed()
    assert all(hasattr(built, name) for name in Record.__slots__)
    with pytest.raises(ValueError):  # one column too few: refused, not a record with a field unset
        build_records(1, ([""],) * (len(Record.__slots__) - 1))


# -- the collector paused over bulk builds -------------------------------------------------------------


def test_the_collector_is_off_inside_a_pause_and_back_on_after_it_even_on_an_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_pause_leaves_a_collector_the_application_turned_off_as_it_was() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_building_records_and_decoding_a_malformed_body_leave_the_collector_on() -> None:
    page(10).records(SHARD)
    assert gc.isenabled()
    with pytest.raises(MalformedResponseError):
        decode_get_records(b'{"Records": [{"SequenceNumber": "1", "Data": "not base64!"}]}')
    assert gc.isenabled()
