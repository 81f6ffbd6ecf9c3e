"""One shard's read state, with no I/O: the part every reader shares, whatever driver moves it.

:meth:`ShardCursor.accept` owns the position, de-aggregation, stop reasons, expiry backoff and the
caught-up judgement; drivers keep iterators or subscriptions, sleeping and call retries."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable

from ..positions import Position, PositionKind, validate_sequence_number
from ..records import ChildShard, RecordPage
from .aggregation import deaggregate
from .pacing import caught_up, doubling_s

EXPIRED_ITERATOR_ATTEMPTS = 10  # fresh iterators expiring again and again (~14 s of backoff): give up
EXPIRED_ITERATOR_MAX_BACKOFF_S = 2.0


class StopReason(str, enum.Enum):
    RECORD_LIMIT = "record_limit"
    TIME_LIMIT = "time_limit"
    CAUGHT_UP = "caught_up"
    END_SEQUENCE = "end_sequence"
    END_TIMESTAMP = "end_timestamp"
    SHARD_END = "shard_end"


class CursorState(str, enum.Enum):
    READING = "reading"
    ENDED = "ended"  # SHARD_END seen: the shard is closed and every record was delivered


@dataclass(frozen=True)
class ReadEnd:
    """Where a bounded read must stop: after sequence number ``sequence`` (inclusive), before the
    first record that arrived after ``timestamp`` (epoch seconds). Either may be None."""

    sequence: int | None = None
    timestamp: float | None = None

    @classmethod
    def of(cls, sequence: str | None = None, timestamp: datetime | None = None) -> ReadEnd:
        return cls(
            int(validate_sequence_number(sequence)) if sequence is not None else None,
            timestamp.timestamp() if timestamp is not None else None,
        )


NO_END = ReadEnd()


@dataclass(frozen=True)
class Step:
    """What one page meant: user records to deliver, a stop it met, and whether to re-acquire.
    ``raw_records`` counts Kinesis records (an aggregate is one). ``reacquire``: the page was cut,
    so the iterator or subscription must restart at :attr:`ShardCursor.position`."""

    page: RecordPage
    raw_records: int
    stop: StopReason | None
    reacquire: bool = False
    resumed_past: str | None = None  # the first record read when the one resumed at was gone (see accept)

    def caught_up(self, limit: int) -> bool:
        return caught_up(self.raw_records, self.page.millis_behind_latest, limit)


class ShardCursor:
    """The read state of one shard; not thread-safe, one per shard and driver."""

    def __init__(
        self,
        stream: str,
        shard_id: str,
        start: Position,
        *,
        strict_aggregation: bool = False,
        on_deaggregated: Callable[[int, int], None] | None = None,
    ) -> None:
        self.stream = stream
        self.shard_id = shard_id
        self.position = start
        self.strict_aggregation = strict_aggregation
        self.state = CursorState.READING
        self.child_shards: tuple[ChildShard, ...] = ()
        self.millis_behind_latest: int | None = None
        self.aggregates = 0
        self.malformed_aggregates = 0
        self.expired_in_a_row = 0
        self.on_deaggregated = on_deaggregated  # (aggregates, malformed) per page that had any

    @property
    def ended(self) -> bool:
        return self.state is CursorState.ENDED

    def stopped_before_reading(self, end: ReadEnd = NO_END) -> StopReason | None:
        """A stop already met where the cursor stands, before any call. AFTER a sequence number has
        read that record; AT one (a start settled at the oldest record left after a trim) has not: a
        replay whose recorded end is that record must still read it."""
        if self.ended:
            return StopReason.SHARD_END
        seq = self.position.sequence_number
        if end.sequence is None or seq is None or self.position.inside_record:
            return None  # inside an aggregate, its remaining user records are still to be read
        if self.position.kind is PositionKind.AT_SEQUENCE_NUMBER:
            return StopReason.END_SEQUENCE if int(seq) > end.sequence else None
        return StopReason.END_SEQUENCE if int(seq) >= end.sequence else None

    # -- pages ------------------------------------------------------------------------------

    def accept(self, raw: RecordPage, end: ReadEnd = NO_END, max_records: int | None = None) -> Step:
        """Take one fetched page: de-aggregate, cut at ``end``, drop what was delivered, advance.

        ``max_records`` caps user records, rounded up to the end of an aggregate (RECORD_LIMIT, then
        a re-acquire). A resume inside a record trimmed meanwhile starts at the oldest record left:
        ``resumed_past`` names it, and records between the two were lost."""
        self.expired_in_a_row = 0
        self.millis_behind_latest = raw.millis_behind_latest
        delivered = self.position
        if delivered.inside_record and len(raw) and raw.sequence_numbers[0] != delivered.sequence_number:
            return replace(self._accept(raw, end, max_records, delivered), resumed_past=raw.sequence_numbers[0])
        return self._accept(raw, end, max_records, delivered)

    def _accept(self, raw: RecordPage, end: ReadEnd, max_records: int | None, delivered: Position) -> Step:
        page = self._deaggregate(raw) if len(raw) else raw
        page, cut, dropped = _cut(page, end)
        if max_records is not None:
            limited = _limit(page, delivered, max_records)
            if limited is not None:
                page, cut, dropped = limited, StopReason.RECORD_LIMIT, True
        if dropped:  # the iterator is past what was kept: the shard's end, if this page had it, is not reached
            if len(page):
                self.position = Position.after_sequence(page.sequence_numbers[-1])
            return Step(_drop_through(page, delivered), len(raw), cut, reacquire=True)
        if len(raw):  # the raw last record: an aggregate holding no user records is passed too
            self.position = Position.after_sequence(raw.sequence_numbers[-1])
        page = _drop_through(page, delivered)
        if raw.next_iterator is None:
            self.state = CursorState.ENDED
            self.child_shards = raw.child_shards
            return Step(page, len(raw), StopReason.SHARD_END)
        return Step(page, len(raw), cut)

    def _deaggregate(self, raw: RecordPage) -> RecordPage:
        result = deaggregate(raw, strict=self.strict_aggregation, shard_id=self.shard_id, stream=self.stream)
        self.aggregates += result.aggregates
        self.malformed_aggregates += result.malformed
        if (result.aggregates or result.malformed) and self.on_deaggregated is not None:
            self.on_deaggregated(result.aggregates, result.malformed)
        return result.page

    # -- expired iterators --------------------------------------------------------------------

    def iterator_expired(self) -> float:
        """Seconds to wait before re-acquiring an iterator at :attr:`position`: none after a first
        expiry (a slow consumer), then doubling up to :data:`EXPIRED_ITERATOR_MAX_BACKOFF_S`."""
        self.expired_in_a_row += 1
        if self.expired_in_a_row == 1:
            return 0.0
        return doubling_s(0.1, self.expired_in_a_row - 1, EXPIRED_ITERATOR_MAX_BACKOFF_S)

    @property
    def expiry_exhausted(self) -> bool:
        """True after :data:`EXPIRED_ITERATOR_ATTEMPTS` expiries in a row: a bounded read gives up."""
        return self.expired_in_a_row >= EXPIRED_ITERATOR_ATTEMPTS


def _cut(page: RecordPage, end: ReadEnd) -> tuple[RecordPage, StopReason | None, bool]:
    """The records up to ``end``, the stop met (None: none), and whether records were dropped."""
    if not len(page) or end == NO_END:
        return page, None, False
    keep, reason = len(page), None
    if end.sequence is not None and int(page.sequence_numbers[-1]) >= end.sequence:
        keep = sum(1 for s in page.sequence_numbers if int(s) <= end.sequence)
        reason = StopReason.END_SEQUENCE
    if end.timestamp is not None and max(filter(None, page.arrival_epoch), default=0.0) > end.timestamp:
        # max() in C first: in a bounded read nearly every page is wholly before the cut
        late = next((i for i, t in enumerate(page.arrival_epoch) if t is not None and t > end.timestamp), None)
        if late is not None and late < keep:
            keep, reason = late, StopReason.END_TIMESTAMP
    if keep == len(page):
        return page, reason, False
    return page.slice(keep), reason, True


def _covered(page: RecordPage, delivered: Position) -> int:
    """How many user records leading the page a position inside an aggregate already covers."""
    if not delivered.inside_record:
        return 0
    seq, sub = delivered.sequence_number, delivered.sub_sequence_number
    skip = 0
    while skip < len(page) and page.sequence_numbers[skip] == seq and page.sub_sequence(skip) <= sub:  # type: ignore[operator]
        skip += 1
    return skip


def _drop_through(page: RecordPage, delivered: Position) -> RecordPage:
    """Drop the user records a position inside an aggregate already covers (they lead the page)."""
    skip = _covered(page, delivered)
    return page.slice(len(page), skip) if skip else page


def _limit(page: RecordPage, delivered: Position, max_records: int) -> RecordPage | None:
    """The page cut after ``max_records`` new user records and the rest of their aggregate; None: no cut."""
    if max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")
    last = _covered(page, delivered) + max_records - 1
    if last >= len(page) - 1:
        return None
    seqs = page.sequence_numbers
    keep = last + 1
    while keep < len(page) and seqs[keep] == seqs[last]:
        keep += 1
    return page.slice(keep) if keep < len(page) else None
