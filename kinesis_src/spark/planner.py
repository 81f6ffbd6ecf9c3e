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

The frontier's values are :mod:`.frontier`'s and the walks over the lineage
:mod:`.lineage_walks`' (re-exported here); shards trimmed before they were
read are :mod:`.retention`'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, Iterable, Mapping, Sequence

from lineage import KeyRange, ShardGraph

from ..positions import Position
from .frontier import TRIMMED_STOP, BatchEnd, Frontier, ShardStatus
from .lineage_walks import (
    ImpliedDrained,
    LineageRanks,
    compact_drained,
    lineage_rank,
    listed_ancestors,
    shards_in_order,
    with_implied_drained,
)
from .offsets import Plan, ShardPlan

__all__ = [  # the frontier's values and the lineage walks are re-exported for the modules that plan with them
    "TRIMMED_STOP", "BatchEnd", "Frontier", "ImpliedDrained", "LineageRanks", "ShardStatus",
    "admit_ready", "advance", "compact_drained", "for_trigger", "idle_shards", "lineage_rank",
    "listed_ancestors", "next_plan", "shards_in_order", "split_read_limit", "with_implied_drained",
]

LIMIT_STOPS = frozenset({"record_limit", "time_limit"})
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
