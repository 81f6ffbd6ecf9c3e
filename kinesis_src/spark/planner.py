"""Driver-side planning of micro-batches, without I/O: the next plan, or None (no batch).

Every plan carries the whole frontier, so a restart rebuilds everything from the checkpoint.
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

    A read shard with no recorded end was never run by Spark and delivered nothing (tasks record
    before they yield): it keeps its start and stays pending.
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

    With ``key_range``, a ready shard outside it counts as drained at once, so its children follow.
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

    FINISHED means "read up to its AvailableNow run's cut": another cut reads every shard again,
    and a run without a cut probes them as idle, or records after the old cut would never be read.
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

    The remainder goes one record each from a start that rotates every batch, so every shard
    with data gets its turn; the same inputs always give the same split (replay).
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
