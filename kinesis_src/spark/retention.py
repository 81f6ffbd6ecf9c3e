"""Retention for the Spark driver, no I/O: shards trimmed whole or in part before being read."""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, Mapping, Sequence

from lineage import shard_sort_key

from ..errors import DataLossError
from ..positions import Position, PositionKind
from .frontier import Frontier

HOUR_MS = 3_600_000
SKIP_HINT = "set failOnDataLoss=false to skip them and continue"


def drop_trimmed(
    frontier: Frontier, listed: Collection[str], fail_on_data_loss: bool, stream: str
) -> tuple[Frontier, list[str]]:
    """Frontier shards a full listing no longer has: trimmed past retention before we read them.

    Only shards older than the newest listed one count (a newer one missing is a listing behind a
    reshard). Raises :class:`DataLossError`, or drains and returns them.
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
    """Shards whose resume position may have been trimmed, worth a probe.

    After a restart, every shard at or after a sequence number; else those whose lag is within
    an hour of the retention period.
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

    Raises :class:`DataLossError`, or goes on from the oldest record (where Kinesis reads anyway).
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
