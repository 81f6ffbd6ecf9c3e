"""Bounded window reads: parsing start/end, the exact [start, end) cut, and the lineage walk on a fake stream."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pytest
from fake_kinesis import FakeKinesis

from kinesis_src import read_table
from kinesis_src.arrow import ARROW_SCHEMA, page_to_arrow
from kinesis_src.cli import export_format
from kinesis_src.errors import ConfigurationError, InvalidPositionError
from kinesis_src.positions import Position, PositionKind
from kinesis_src.records import RecordPage
from kinesis_src.window import Window, _in_window, resolve_window

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
TOP = 2**128 - 1


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# -- start / end --------------------------------------------------------------------


@pytest.mark.parametrize("word", ["trim_horizon", "EARLIEST", " earliest "])
def test_start_keywords_for_the_trim_horizon(word: str) -> None:
    assert resolve_window(word, "latest", NOW) == Window(None, NOW)


def test_latest_is_the_call_time_for_both_bounds() -> None:
    assert resolve_window("latest", "latest", NOW) == Window(NOW, NOW)  # empty, not an error
    assert resolve_window("latest", "2026-03-02T00:00:00Z", NOW).start == NOW


def test_iso_strings_and_aware_datetimes_become_utc() -> None:
    window = resolve_window("2026-03-01T10:00:00+02:00", "2026-03-01T09:30:00", NOW)
    assert window.start == datetime(2026, 3, 1, 8, tzinfo=UTC)
    assert window.end == datetime(2026, 3, 1, 9, 30, tzinfo=UTC)  # no offset: UTC
    zoned = datetime(2026, 3, 1, 14, tzinfo=timezone(timedelta(hours=5)))
    assert resolve_window(zoned, NOW, NOW).start == datetime(2026, 3, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize("arg", ["start", "end"])
def test_a_naive_datetime_is_refused_as_ambiguous(arg: str) -> None:
    kwargs = {"start": "trim_horizon", "end": "latest", arg: datetime(2026, 3, 1, 11)}
    naive = rf"{arg}=datetime.datetime\(2026, 3, 1, 11, 0\) is a naive datetime"
    with pytest.raises(InvalidPositionError, match=naive):
        resolve_window(now=NOW, **kwargs)


@pytest.mark.parametrize("arg, value", [("start", "last tuesday"), ("end", ""), ("start", 1700000000), ("end", None)])
def test_unreadable_bounds_name_the_argument_and_what_is_accepted(arg: str, value: object) -> None:
    kwargs = {"start": "trim_horizon", "end": "latest", arg: value}
    with pytest.raises(ConfigurationError) as info:
        resolve_window(now=NOW, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{arg}={value!r}")
    assert "'latest'" in message and "ISO-8601" in message and "aware datetime" in message
    assert ("'trim_horizon' (alias 'earliest')" in message) == (arg == "start")


def test_the_window_cannot_end_at_the_trim_horizon() -> None:
    with pytest.raises(InvalidPositionError, match="end='earliest': a window cannot end at the trim horizon"):
        resolve_window("trim_horizon", "earliest", NOW)


def test_end_before_start_names_both_values() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_window("2026-03-01T11:00:00Z", "2026-03-01T10:00:00Z", NOW)
    assert str(info.value) == (
        "end '2026-03-01T10:00:00Z' (2026-03-01T10:00:00.000000Z) is before start '2026-03-01T11:00:00Z' "
        "(2026-03-01T11:00:00.000000Z); a window needs start <= end"
    )
    with pytest.raises(ConfigurationError, match="end '2026-03-01T10:00:00Z'.* is before start 'latest'"):
        resolve_window("latest", "2026-03-01T10:00:00Z", NOW)
    assert resolve_window(NOW, NOW, NOW) == Window(NOW, NOW)


def test_the_first_position_asks_one_millisecond_early() -> None:
    assert Window(None, NOW).first_position() == Position.trim_horizon()
    position = Window(NOW, NOW).first_position()
    assert position.kind is PositionKind.AT_TIMESTAMP
    assert position.timestamp == NOW - timedelta(milliseconds=1)


def test_bad_input_fails_before_any_call() -> None:
    unusable = object()  # any AWS call on it would raise AttributeError
    with pytest.raises(ConfigurationError, match="start='soon'"):
        read_table("s", "soon", kinesis=unusable)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_records=-1"):
        read_table("s", kinesis=unusable, max_records=-1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not both"):
        read_table("s", kinesis=unusable, region="us-east-1")  # type: ignore[arg-type]


def test_the_export_format_comes_from_the_flag_or_the_suffix() -> None:
    assert export_format("out.PARQUET", None) == "parquet"
    assert export_format("out.json", None) == export_format("o.jsonl", None) == "jsonl"
    assert export_format("out.bin", "parquet") == "parquet"
    with pytest.raises(ConfigurationError, match=r"'out.csv'.*\.parquet, \.jsonl or \.json, or pass --format"):
        export_format("out.csv", None)


# -- the exact cut ------------------------------------------------------------------


def page(seqs: list[str], arrivals: list[float | None]) -> RecordPage:
    return RecordPage(
        partition_keys=[f"k{s}" for s in seqs],
        data=[s.encode() for s in seqs],
        sequence_numbers=seqs,
        arrival_epoch=arrivals,
        encryption_types=[None] * len(seqs),
        next_iterator="more",
        millis_behind_latest=0,
    )


def test_the_cut_keeps_start_and_drops_end_on_table_microseconds() -> None:
    arrivals = [9.999, 10.0, 10.0000004, 10.5, 10.9999994, 11.0, None]
    batch = page_to_arrow(page([str(i) for i in range(7)], arrivals), "s", "shardId-000000000000")
    kept = _in_window(batch, Window(utc(10.0), utc(11.0)))
    # 10.0000004 rounds to 10.000000 (kept), 10.9999994 rounds to 10.999999 (kept),
    # 11.0 is the exclusive end; a record without an arrival time is kept.
    assert kept.column("sequenceNumber").to_pylist() == ["1", "2", "3", "4", "6"]
    assert _in_window(batch, Window(None, utc(10.0))).column("sequenceNumber").to_pylist() == ["0", "6"]
    assert kept.schema == ARROW_SCHEMA


# -- the lineage walk on a fake stream ------------------------------------------------


def fake_stream() -> FakeKinesis:
    """Stream "s" on the shared fake: shard 0 splits into 1 and 2; 1 and 2 merge into 3 (open).

    Record arrival times (seconds): 0 -> 1, 2; 1 -> 3, 4; 2 -> 3.5, 4.5; 3 -> 5, 6.
    """
    fake = FakeKinesis(clock=0.0)
    fake.create_stream("s", 1)

    def put(n: int, *arrivals: float) -> None:
        for t in arrivals:
            fake.put_record("s", f"k{t}", str(t).encode(), shard_id=sid(n), arrival=t)

    put(0, 1.0, 2.0)
    fake.split_shard("s", sid(0), 2**127)
    for n, t in [(1, 3.0), (2, 3.5), (1, 4.0), (2, 4.5)]:
        put(n, t)
    fake.merge_shards("s", sid(1), sid(2))
    put(3, 5.0, 6.0)
    return fake


def iterators_asked(fake: FakeKinesis) -> list[tuple[str, Position]]:
    return [(c.shard_id, c.position) for c in fake.calls_to("get_shard_iterator")]


def sid(n: int) -> str:
    return f"shardId-{n:012d}"


def rows(table: pa.Table) -> list[tuple[str, float]]:
    return [
        (row["shardId"][-1:], row["approximateArrivalTimestamp"].timestamp())
        for row in table.select(["shardId", "approximateArrivalTimestamp"]).to_pylist()
    ]


def test_a_full_window_reads_parents_before_children() -> None:
    fake = fake_stream()
    table = read_table("s", kinesis=fake, progress=False)  # type: ignore[arg-type]
    assert table.schema == ARROW_SCHEMA
    assert rows(table) == [
        ("0", 1.0), ("0", 2.0), ("1", 3.0), ("1", 4.0), ("2", 3.5), ("2", 4.5), ("3", 5.0), ("3", 6.0)
    ]
    assert set(table.column("stream").to_pylist()) == {"s"}


def test_a_shard_past_the_end_stops_and_its_children_are_never_read() -> None:
    fake = fake_stream()
    table = read_table("s", utc(2.0), utc(4.2), kinesis=fake, progress=False)  # type: ignore[arg-type]
    assert rows(table) == [("0", 2.0), ("1", 3.0), ("1", 4.0), ("2", 3.5)]
    assert sid(3) not in {shard for shard, _ in iterators_asked(fake)}
    assert all(p == Position.at_timestamp(utc(2.0) - timedelta(milliseconds=1)) for _, p in iterators_asked(fake)[:3])


def test_end_is_exclusive_and_start_inclusive_across_shards() -> None:
    table = read_table("s", utc(3.5), utc(5.0), kinesis=fake_stream(), progress=False)  # type: ignore[arg-type]
    assert rows(table) == [("1", 4.0), ("2", 3.5), ("2", 4.5)]


def test_max_records_keeps_a_prefix_of_lineage_order() -> None:
    fake = fake_stream()
    table = read_table("s", kinesis=fake, progress=False, max_records=3)  # type: ignore[arg-type]
    assert rows(table) == [("0", 1.0), ("0", 2.0), ("1", 3.0)]
    assert sid(2) not in {shard for shard, _ in iterators_asked(fake)}  # stopped reading, not just trimmed
    assert read_table("s", kinesis=fake_stream(), progress=False, max_records=0).num_rows == 0  # type: ignore[arg-type]


def test_an_empty_window_is_an_empty_table_with_the_schema() -> None:
    table = read_table("s", utc(100.0), utc(100.0), kinesis=fake_stream(), progress=False)  # type: ignore[arg-type]
    assert table.num_rows == 0 and table.schema == ARROW_SCHEMA


def test_progress_bar_counts_records_and_shards(capsys: pytest.CaptureFixture[str]) -> None:
    read_table("s", kinesis=fake_stream(), progress=True)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "8 rec" in err and "4 shards done" in err
    read_table("s", kinesis=fake_stream(), progress=None)  # type: ignore[arg-type]
    assert sys.stderr.isatty() or capsys.readouterr().err == ""  # None: only on a terminal
