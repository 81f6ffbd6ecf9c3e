"""Driver-side planning of micro-batches, without I/O.

Given the previous plan, where its shards actually ended (from per-batch
progress), the current lineage graph and which idle shards have new data,
decide the next plan -- or that there is nothing to do, in which case the
source returns its start offset and Spark runs no (empty) batch.

The frontier of a stream is every shard that is ready (parents drained, or
trimmed) and not yet drained, with the position where its next read starts.
Every plan carries the whole frontier, including shards it does not read,
so a restart rebuilds everything from the checkpointed offset plus the
recorded progress of that offset's batch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Collection, Iterable, Mapping, Sequence

from lineage import KeyRange, ShardGraph, shard_sort_key

from ..errors import DataLossError
from ..positions import Position, PositionKind
from .offsets import Plan, ShardPlan


class ShardStatus(str, enum.Enum):
    PENDING = "pending"  # may have unread records: stopped on a limit, left out by the read limit, never ran, or new
    IDLE = "idle"  # last read reached the tip; needs a cheap probe before it is read again
    FINISHED = "finished"  # read up to the cut of the AvailableNow run that planned it (see for_trigger)


@dataclass(frozen=True)
class BatchEnd:
    """Where one shard's read in a batch ended, as recorded by the task that won the write."""

    next_position: Position
    record_count: int
    shard_end: bool
    stop_reason: str
    millis_behind_latest: int | None = None
    # what the read cost, for the query progress only (planning ignores them): record data bytes, and the
    # retries the task's read made, throttles among them (kinesis_src.spark.task_figures)
    byte_count: int = 0
    throttles: int = 0
    retries: int = 0


@dataclass(frozen=True)
class Frontier:
    positions: Mapping[str, Position]
    status: Mapping[str, ShardStatus]
    drained: frozenset[str]


LIMIT_STOPS = frozenset({"record_limit", "time_limit"})
TRIMMED_STOP = "trimmed"  # a task found its shard gone (failOnDataLoss=false): recorded as ended, 0 records
HOUR_MS = 3_600_000
CUT_STOPS = frozenset({"caught_up", "end_timestamp"})


def advance(plan: Plan, ends: Mapping[str, BatchEnd]) -> Frontier:
    """The frontier after ``plan`` ran: read shards move to their recorded ends.

    Batch 0 is the initial plan: nothing was read yet, so every shard is pending.
    A read shard with no recorded end was in a partition Spark never ran (a foreachBatch
    that called take(1), show() or isEmpty(), or ignored df). Tasks record their ends before
    yielding a row, so no attempt delivered anything from it: it keeps its start and stays
    pending (it may have unread data).
    """
    positions = {sid: sp.start for sid, sp in plan.shards.items()}
    if plan.batch == 0:
        return Frontier(positions, {sid: ShardStatus.PENDING for sid in positions}, plan.drained)
    status = {sid: _carried_status(plan, sid) for sid in plan.shards}
    drained = set(plan.drained)
    for sid in plan.read:
        end = ends.get(sid)
        if end is None:
            status[sid] = ShardStatus.PENDING
        elif end.shard_end:
            drained.add(sid)
            positions.pop(sid)
            status.pop(sid)
        else:
            positions[sid] = end.next_position
            status[sid] = _status_after_read(plan, end)
    return Frontier(positions, status, frozenset(drained))


def _carried_status(plan: Plan, sid: str) -> ShardStatus:
    """A shard the plan did not read keeps what the plan knew of it."""
    if sid in plan.pending:
        return ShardStatus.PENDING
    return ShardStatus.FINISHED if sid in plan.finished else ShardStatus.IDLE


def _status_after_read(plan: Plan, end: BatchEnd) -> ShardStatus:
    if end.stop_reason in LIMIT_STOPS:
        return ShardStatus.PENDING
    if plan.cut is not None and end.stop_reason in CUT_STOPS:
        return ShardStatus.FINISHED
    return ShardStatus.IDLE


def admit_ready(
    frontier: Frontier,
    graph: ShardGraph,
    preserve_order: bool,
    start_of: Mapping[str, Position] | None = None,
    default_start: Position | None = None,
    key_range: KeyRange | None = None,
) -> Frontier:
    """Add shards that became readable: children whose parents drained (or any shard, opted out).

    With a ``key_range`` (hashKeyRange), a ready shard whose hash range does not overlap it
    holds no record of the slice: it counts as drained at once, never read, so its children
    become ready in turn (a slice follows its keys through any split or merge).
    """
    candidates: Iterable[str]
    drained = set(frontier.drained)
    positions = dict(frontier.positions)
    status = dict(frontier.status)
    while True:
        if preserve_order:
            candidates = graph.ready(drained)
        else:
            candidates = (s for s in graph.shard_ids() if s not in drained)
        fresh = [s for s in candidates if s not in positions and s not in drained]
        if not fresh:
            break
        # After a restart the listing also holds old closed shards this query skipped (they precede
        # its start); they look ready because their own parents are trimmed. Never go back to them.
        behind = listed_ancestors(graph, [*positions, *drained])
        outside = False
        for sid in fresh:
            if sid in behind:
                continue
            if key_range is not None and not key_range.overlaps(graph.hash_range(sid)):
                drained.add(sid)
                outside = True
                continue
            positions[sid] = (start_of or {}).get(sid) or default_start or Position.trim_horizon()
            status[sid] = ShardStatus.PENDING
        if not outside:
            break  # shards skipped as outside the range may have made their children ready: look again
    return Frontier(positions, status, frozenset(drained))


def shards_in_order(graph: ShardGraph, key_range: KeyRange | None = None) -> list[str]:
    """Every listed shard, parents before children; with ``key_range`` only those overlapping it."""
    rank = lineage_rank(graph)
    shards = sorted(graph.shard_ids(), key=lambda s: (rank[s], s))
    if key_range is None:
        return shards
    return [s for s in shards if key_range.overlaps(graph.hash_range(s))]


def for_trigger(previous: Plan, frontier: Frontier, cut: str | None) -> Frontier:
    """The frontier's statuses as the current trigger sees them.

    FINISHED only means "read up to the cut of the AvailableNow run that planned it". A new
    AvailableNow run (another cut) reads every shard once more up to its own cut; a run without
    a cut (processing-time trigger on the same checkpoint) must probe those shards like any idle
    one, or records that arrived after the old cut would never be read.
    """
    if cut is not None and previous.cut != cut:
        status = {sid: ShardStatus.PENDING for sid in frontier.status}
    elif cut is None:
        status = {sid: ShardStatus.IDLE if st is ShardStatus.FINISHED else st for sid, st in frontier.status.items()}
    else:
        return frontier
    return replace(frontier, status=status)


def next_plan(
    previous: Plan,
    frontier: Frontier,
    has_data: Mapping[str, bool],
    max_records_per_shard: int,
    max_rows: int | None,
    cut: str | None,
    held: Collection[str] = (),
) -> Plan | None:
    """The plan of the next batch, or None when no shard has anything to read.

    ``held`` shards are carried, not read (their position awaits a check); pending ones stay pending.
    """
    status = for_trigger(previous, frontier, cut).status
    wanting = [
        sid for sid, st in sorted(status.items())
        if sid not in held
        and (st is ShardStatus.PENDING or (st is ShardStatus.IDLE and cut is None and has_data.get(sid, False)))
    ]
    if not wanting:
        return None
    batch = previous.batch + 1
    quota = split_read_limit(wanting, sorted(frontier.positions), batch, max_records_per_shard, max_rows)
    return Plan(
        run=previous.run,
        batch=batch,
        stream=previous.stream,
        shards={sid: ShardPlan(pos, quota.get(sid, 0)) for sid, pos in frontier.positions.items()},
        drained=frontier.drained,
        finished=frozenset(sid for sid, st in status.items() if st is ShardStatus.FINISHED),
        cut=cut,
        pending=frozenset(sid for sid in wanting if quota[sid] == 0)
        | frozenset(sid for sid in held if status.get(sid) is ShardStatus.PENDING),
    )


def split_read_limit(
    wanting: Sequence[str], frontier: Sequence[str], batch: int, per_shard: int, max_rows: int | None
) -> dict[str, int]:
    """Records per shard: ``max_rows`` split exactly (a hard cap), each share capped by ``per_shard``.

    Each shard gets ``max_rows // n``; the remainder goes one record each to shards taken in
    frontier order from a start that moves by the remainder every batch. So below one record
    per shard, every shard with data is read within ceil(frontier size / max_rows) batches,
    whatever the others do, and the same inputs always give the same split (replay).
    """
    if max_rows is None:
        return {sid: per_shard for sid in wanting}
    base, extra = divmod(max_rows, len(wanting))
    start = (batch - 1) * extra % len(frontier)
    want = set(wanting)
    rotated = [sid for sid in frontier[start:] + frontier[:start] if sid in want]
    lucky = set(rotated[:extra])
    return {sid: min(per_shard, base + (sid in lucky)) for sid in wanting}


def idle_shards(frontier: Frontier) -> list[str]:
    return sorted(sid for sid, st in frontier.status.items() if st is ShardStatus.IDLE)


def compact_drained(plan: Plan, graph: ShardGraph) -> Plan:
    """Keep only the drained shards the lineage does not imply; forget those no longer listed (trimmed).

    Every listed ancestor of a frontier shard or of a drained shard is drained (or was skipped
    as older than the query's start, which comes to the same: it is never read), because a
    shard joins the frontier only once its parents are drained, and a restart rebuilds the
    lineage from a full listing before it plans. So the offset needs only the drained shards
    with no listed descendant in the plan: the parent of a merge still waiting for its other
    parent, a closed shard whose children are not listed yet. With 1,000 open shards and
    5,000 drained ancestors that is none instead of 5,000 ids. :func:`with_implied_drained`
    adds the rest back; unknown (trimmed) parents never block, as before.
    """
    listed = {s for s in plan.drained if s in graph}
    kept = frozenset(listed - listed_ancestors(graph, [*plan.shards, *listed]))
    return plan if kept == plan.drained else replace(plan, drained=kept)


def with_implied_drained(frontier: Frontier, graph: ShardGraph) -> Frontier:
    """The frontier with every listed ancestor of its shards and drained shards counted as drained."""
    implied = listed_ancestors(graph, [*frontier.positions, *frontier.drained]) - frontier.positions.keys()
    if implied <= frontier.drained:
        return frontier
    return replace(frontier, drained=frontier.drained | implied)


class ImpliedDrained:
    """:func:`with_implied_drained`, remembered while the frontier, drained set and graph stay the same.

    With a 0 s trigger and nothing new, ``latestOffset`` asks ~90 times a second about the same
    frontier; the walk over a long lineage (6,000 shards: tens of ms) is then done once.
    """

    def __init__(self) -> None:
        self._key: tuple[int, frozenset[str], frozenset[str]] | None = None
        self._drained: frozenset[str] = frozenset()
        self.computed = 0  # how often the walk ran (tests)

    def apply(self, frontier: Frontier, graph: ShardGraph) -> Frontier:
        key = (len(graph), frozenset(frontier.positions), frontier.drained)
        if key != self._key:
            self._key, self._drained = key, with_implied_drained(frontier, graph).drained
            self.computed += 1
        return frontier if self._drained == frontier.drained else replace(frontier, drained=self._drained)


def listed_ancestors(graph: ShardGraph, shard_ids: Iterable[str]) -> set[str]:
    """Known ancestors of the given shards, in one walk (each shard visited once, however many share it)."""
    seen: set[str] = set()
    todo = [s for s in shard_ids if s in graph]
    while todo:
        for parent in graph.parents(todo.pop()):
            if parent in graph and parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def lineage_rank(graph: ShardGraph) -> dict[str, int]:
    """Depth of each shard in the lineage (roots 1); sorting by it puts parents before children."""
    rank: dict[str, int] = {}
    for sid in graph.shard_ids():  # ids grow with lineage: parents are ranked first
        rank[sid] = 1 + max((rank.get(p, 0) for p in graph.parents(sid)), default=0)
    return rank


class LineageRanks:
    """:func:`lineage_rank` of the driver's graph, computed again only when the graph gained shards.

    ``partitions()`` orders every batch's shards by it; with thousands of shards in the lineage
    that walk cost more than the rest of the batch's planning. A listed shard's parents never
    change and the graph never forgets a shard, so the ranks change only with the shard count.
    """

    def __init__(self) -> None:
        self._graph: ShardGraph | None = None
        self._size = -1
        self._rank: dict[str, int] = {}
        self.computed = 0  # how often the walk ran (tests, benchmarks)

    def of(self, graph: ShardGraph) -> Mapping[str, int]:
        if graph is not self._graph or len(graph) != self._size:
            self._graph, self._size, self._rank = graph, len(graph), lineage_rank(graph)
            self.computed += 1
        return self._rank


# -- retention: shards trimmed whole or in part (failOnDataLoss) --------------------------------------

SKIP_HINT = "set failOnDataLoss=false to skip them and continue"


def drop_trimmed(
    frontier: Frontier, listed: Collection[str], fail_on_data_loss: bool, stream: str
) -> tuple[Frontier, list[str]]:
    """Frontier shards a full listing no longer has: trimmed past retention before we read them.

    Only shards older than the newest listed shard count: a newer one missing is a listing
    that lags behind a reshard, not a trim. With ``fail_on_data_loss`` this raises
    :class:`DataLossError` naming each shard and its unread position; otherwise the shards
    leave the frontier as drained (so their children become ready) and are returned.
    """
    if not listed:
        return frontier, []
    newest = shard_sort_key(max(listed, key=shard_sort_key))
    trimmed = sorted(
        (s for s in frontier.positions if s not in listed and shard_sort_key(s) < newest), key=shard_sort_key
    )
    if not trimmed:
        return frontier, []
    if fail_on_data_loss:
        raise DataLossError(f"{trimmed_message(stream, frontier, trimmed)}; {SKIP_HINT}")
    gone = set(trimmed)
    kept = Frontier(
        {s: p for s, p in frontier.positions.items() if s not in gone},
        {s: st for s, st in frontier.status.items() if s not in gone},
        frontier.drained | gone,
    )
    return kept, trimmed


def trimmed_message(stream: str, frontier: Frontier, shard_ids: Sequence[str]) -> str:
    detail = ", ".join(f"{s} (unread from {frontier.positions[s]})" for s in shard_ids)
    return f"stream {stream!r}: shard(s) {detail} were trimmed past retention before they were read"


def checkpointed_sequence(position: Position) -> str | None:
    """The sequence number a resume position depends on (after/at it), or None."""
    if position.kind in (PositionKind.AFTER_SEQUENCE_NUMBER, PositionKind.AT_SEQUENCE_NUMBER):
        return position.sequence_number
    return None


def shards_to_verify(
    frontier: Frontier, lag: Mapping[str, int], retention_hours: int, after_restart: bool
) -> list[str]:
    """Shards whose resume position may have been trimmed: worth a probe (it costs 2 calls).

    After a restart (any time may have passed), every shard positioned at or after a sequence
    number; otherwise only shards whose last known MillisBehindLatest is within an hour of the
    retention period, i.e. whose next record is about to expire (or already did).
    """
    candidates = [s for s, p in frontier.positions.items() if checkpointed_sequence(p) is not None]
    if not after_restart:
        danger = max(retention_hours * HOUR_MS - HOUR_MS, 0)
        candidates = [s for s in candidates if lag.get(s, 0) >= danger]
    return sorted(candidates, key=shard_sort_key)


def settle_partial_trims(
    frontier: Frontier, oldest: Mapping[str, str], fail_on_data_loss: bool, stream: str
) -> Frontier:
    """Shards whose checkpointed record is gone: ``oldest[shard]`` is the oldest record still there.

    With ``fail_on_data_loss`` raise :class:`DataLossError` naming shard, checkpointed and oldest
    sequence numbers; otherwise continue explicitly from the oldest record (which is where a
    GetShardIterator at the trimmed position reads from anyway).
    """
    if not oldest:
        return frontier
    if fail_on_data_loss:
        raise DataLossError(f"{partly_trimmed_message(stream, frontier, oldest)}; {SKIP_HINT}")
    positions = dict(frontier.positions)
    positions.update({s: Position.at_sequence(seq) for s, seq in oldest.items()})
    return replace(frontier, positions=positions)


def partly_trimmed_message(stream: str, frontier: Frontier, oldest: Mapping[str, str]) -> str:
    lines = [
        f"shard {s} resumes from checkpointed sequence number {checkpointed_sequence(frontier.positions[s])}, "
        f"but the oldest record still in it is {oldest[s]}"
        for s in sorted(oldest, key=shard_sort_key)
    ]
    return (
        f"stream {stream!r} was partly trimmed past retention before it was read: {'; '.join(lines)}; "
        "the records in between are lost"
    )
