"""Bounded reads: every record that arrived in a time window, as one ``pyarrow.Table``.

Half-open ``[start, end)`` on the table's microseconds, so windows tile a stream (docs/batch.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable, Iterator

from .aws import KinesisClient
from .config import AwsSettings
from .drain import DrainState, drain_stream
from .errors import ConfigurationError, InvalidPositionError
from .ordered_reads import DEFAULT_WORKERS
from .positions import Position, PositionForm, PositionKind, format_timestamp
from .record_progress import RecordProgress, record_progress

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

Bound = datetime | str

_TIMESTAMP_FORMS = "an ISO-8601 timestamp such as 2026-01-31T12:00:00Z (no offset = UTC), or a timezone-aware datetime"
START_ACCEPTS = f"'trim_horizon' (alias 'earliest'), 'latest', {_TIMESTAMP_FORMS}"
END_ACCEPTS = f"'latest' (the moment the read starts), {_TIMESTAMP_FORMS}"

# GetShardIterator carries milliseconds (botocore truncates the rest), and an
# endpoint could treat the AT_TIMESTAMP bound as exclusive; starting this much
# early and cutting exactly on the client keeps the start inclusive either way.
_SERVER_START_MARGIN = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Window:
    """``[start, end)`` in arrival time, UTC; ``start`` None means the trim horizon."""

    start: datetime | None
    end: datetime

    def first_position(self) -> Position:
        """Where each shard's read begins; slightly early on purpose (see ``_SERVER_START_MARGIN``)."""
        if self.start is None:
            return Position.trim_horizon()
        return Position.at_timestamp(self.start - _SERVER_START_MARGIN)

    def __str__(self) -> str:
        start = format_timestamp(self.start) if self.start else "trim_horizon"
        return f"[{start}, {format_timestamp(self.end)})"


def resolve_window(start: Bound = "trim_horizon", end: Bound = "latest", now: datetime | None = None) -> Window:
    """The user's ``start``/``end`` as instants; ``latest`` is ``now`` (default: the clock).

    Raises :class:`ConfigurationError` naming the bad argument; ``end == start`` is empty.
    """
    now = now or datetime.now(timezone.utc)
    lo = _bound("start", start, now, START_ACCEPTS, allow_earliest=True)
    hi = _bound("end", end, now, END_ACCEPTS, allow_earliest=False)
    assert hi is not None
    if lo is not None and hi < lo:
        raise ConfigurationError(
            f"end {end!r} ({format_timestamp(hi)}) is before start {start!r} ({format_timestamp(lo)}); "
            "a window needs start <= end"
        )
    return Window(lo, hi)


_BOUND_FORMS = frozenset({PositionForm.KEYWORD, PositionForm.TIMESTAMP, PositionForm.DATETIME})


def _bound(name: str, value: object, now: datetime, accepts: str, *, allow_earliest: bool) -> datetime | None:
    """One end of the window as an instant (None: the trim horizon); ``latest`` is ``now``."""
    if isinstance(value, datetime):
        _refuse_naive(name, value)
    elif not isinstance(value, str):
        raise InvalidPositionError(f"{name}={value!r} has type {type(value).__name__}; expected {accepts}")
    try:
        position = Position.parse(value, forms=_BOUND_FORMS)
    except InvalidPositionError:
        raise InvalidPositionError(f"{name}={value!r} is not a window bound; expected {accepts}") from None
    if position.kind is PositionKind.LATEST:
        return now
    if position.kind is PositionKind.TRIM_HORIZON and not allow_earliest:
        raise InvalidPositionError(f"{name}={value!r}: a window cannot end at the trim horizon; expected {accepts}")
    return position.timestamp


def _refuse_naive(name: str, value: datetime) -> None:
    """``datetime.now()`` is local time, and taking it as UTC would shift the window silently."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidPositionError(
            f"{name}={value!r} is a naive datetime, which is ambiguous (local time or UTC?); pass an "
            "aware one, e.g. datetime.now(timezone.utc) or value.replace(tzinfo=timezone.utc)"
        )


def read_table(
    stream_name: str,
    start: Bound = "trim_horizon",
    end: Bound = "latest",
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    progress: bool | None = None,
    kinesis: KinesisClient | None = None,
    max_records: int | None = None,
    strict_aggregation: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> pa.Table:
    """Read the records that arrived in ``[start, end)`` from every shard of the lineage.

    ``start``: ``"trim_horizon"``/``"earliest"`` (default), ``"latest"`` (the call time), an
    ISO-8601 string or an aware ``datetime``; ``end``: ``"latest"`` (default), ISO-8601 or a
    ``datetime`` (a future end is not waited for). Rows have :data:`kinesis_src.arrow.ARROW_SCHEMA`
    in lineage order; ``max_records`` keeps the first that many (reading one shard at a time).
    ``progress``: a bar on stderr (None: on a terminal). Pass ``kinesis``, or ``region`` /
    ``endpoint_url`` (default: the environment). KPL aggregates give a row per user record;
    ``strict_aggregation`` raises :class:`~kinesis_src.errors.MalformedAggregateError` on a
    malformed one. ``workers``: shards read at once (the rows' order does not change).
    """
    window = resolve_window(start, end)
    _check_max_records(max_records)
    client = _client(kinesis, region, endpoint_url)
    log.info("reading stream %r, arrival window %s", stream_name, window)
    import pyarrow as pa

    from .arrow import ARROW_SCHEMA

    with record_progress(stream_name, progress) as bar:
        found = window_batches(
            client, stream_name, window, on_shard_done=lambda n: bar.note(_shards_done(n)),
            strict_aggregation=strict_aggregation,
            workers=1 if max_records is not None else workers,
        )
        batches = _take(found, max_records, bar)
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def _shards_done(shards: int) -> str:
    return f"{shards} shard{'' if shards == 1 else 's'} done"


def _take(batches: Iterator[pa.RecordBatch], limit: int | None, bar: RecordProgress) -> list[pa.RecordBatch]:
    """Collect batches, stopping the read as soon as ``limit`` rows are in hand."""
    out: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if limit is not None and rows + batch.num_rows > limit:
            batch = batch.slice(0, limit - rows)
        out.append(batch)
        rows += batch.num_rows
        bar.add(batch.num_rows)
        if limit is not None and rows >= limit:
            break
    return out


def window_batches(
    kinesis: KinesisClient,
    stream: str,
    window: Window,
    *,
    on_shard_done: Callable[[int], None] | None = None,
    strict_aggregation: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> Iterator[pa.RecordBatch]:
    """Non-empty Arrow batches of the window, lazily, in lineage order; ``on_shard_done(n)``."""
    from .arrow import page_to_arrow

    def shard_done(_shard: str, state: DrainState) -> None:
        if on_shard_done:
            on_shard_done(len(state.drained) + len(state.caught_up) + len(state.past_end))

    chunks = drain_stream(
        kinesis, stream, window.first_position(), on_shard_done=shard_done, end=window.end,
        strict_aggregation=strict_aggregation, workers=workers,
    )
    for chunk in chunks:
        for page in chunk.pages:
            batch = _in_window(page_to_arrow(page, stream, chunk.shard_id), window) if len(page) else None
            if batch is not None and batch.num_rows:
                yield batch


def _in_window(batch: pa.RecordBatch, window: Window) -> pa.RecordBatch:
    """The exact cut on the table's microseconds; a record without an arrival time is kept."""

    import pyarrow as pa
    import pyarrow.compute as pc

    ts = batch.column("approximateArrivalTimestamp")
    keep = pc.less(ts, pa.scalar(window.end, ts.type))
    if window.start is not None:
        keep = pc.and_(keep, pc.greater_equal(ts, pa.scalar(window.start, ts.type)))
    return batch.filter(pc.fill_null(keep, True))


def _check_max_records(max_records: int | None) -> None:
    if max_records is None:
        return
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 0:
        raise ConfigurationError(f"max_records={max_records!r}; expected None or an integer >= 0")


def _client(kinesis: KinesisClient | None, region: str | None, endpoint_url: str | None) -> KinesisClient:
    if kinesis is None:
        return KinesisClient(AwsSettings.from_env(region=region, endpoint_url=endpoint_url))
    if region is not None or endpoint_url is not None:
        raise ConfigurationError(
            "pass either kinesis= (a configured client) or region=/endpoint_url=, not both: "
            "the client's own settings would silently win"
        )
    return kinesis

