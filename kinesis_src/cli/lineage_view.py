"""``kinesis-src lineage``: the shard tree from roots to open shards, as rows any renderer can draw.

A merge child is drawn under its first parent in shard order; the other parent gets a reference row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from lineage import ShardGraph, shard_sort_key

HASH_SPACE = 2**128


@dataclass(frozen=True)
class ShardFigures:
    """What reading a shard found: its oldest retained record, and (with ``--count``) totals."""

    oldest_arrival: datetime | None  # None: nothing retained (empty or all expired)
    records: int | None = None  # None: not counted
    data_bytes: int | None = None
    newest_arrival: datetime | None = None


@dataclass(frozen=True)
class LineageRow:
    """One line of the tree: a shard, or a reference to a merge child drawn under its other parent."""

    shard_id: str
    prefix: str  # tree drawing before the id
    open: bool
    parents: tuple[str, ...]
    start: int
    end: int
    oldest_age_s: float | None
    records: int | None
    data_bytes: int | None
    shown_under: str | None = None  # set on a reference row: the parent the child is drawn under

    @property
    def share(self) -> float:
        return (self.end - self.start + 1) / HASH_SPACE

    @property
    def state(self) -> str:
        return "open" if self.open else "closed"


def lineage_rows(graph: ShardGraph, figures: Mapping[str, ShardFigures], now: datetime) -> list[LineageRow]:
    """Roots first (shards whose parents are not listed any more), each followed by its subtree."""
    rows: list[LineageRow] = []
    roots = sorted((s for s in graph.shard_ids() if not any(p in graph for p in graph.parents(s))), key=shard_sort_key)
    for root in roots:
        _subtree(graph, figures, now, root, "", "", rows)
    return rows


def _subtree(
    graph: ShardGraph, figures: Mapping[str, ShardFigures], now: datetime,
    sid: str, prefix: str, child_prefix: str, rows: list[LineageRow],
) -> None:
    rows.append(_row(graph, figures, now, sid, prefix))
    children = sorted(graph.children(sid), key=shard_sort_key)
    for i, child in enumerate(children):
        last = i == len(children) - 1
        branch, extend = ("└─ ", "   ") if last else ("├─ ", "│  ")
        home = _drawn_under(graph, child)
        if home == sid:
            _subtree(graph, figures, now, child, child_prefix + branch, child_prefix + extend, rows)
        else:
            rows.append(_reference(graph, child, child_prefix + branch, home))


def _drawn_under(graph: ShardGraph, child: str) -> str:
    listed = [p for p in graph.parents(child) if p in graph]
    return min(listed, key=shard_sort_key)


def _row(graph: ShardGraph, figures: Mapping[str, ShardFigures], now: datetime, sid: str, prefix: str) -> LineageRow:
    r = graph.hash_range(sid)
    fig = figures.get(sid)
    oldest = fig.oldest_arrival if fig else None
    return LineageRow(
        shard_id=sid, prefix=prefix, open=graph.is_open(sid), parents=graph.parents(sid),
        start=r.start, end=r.end,
        oldest_age_s=(now - oldest).total_seconds() if oldest else None,
        records=fig.records if fig else None, data_bytes=fig.data_bytes if fig else None,
    )


def _reference(graph: ShardGraph, sid: str, prefix: str, home: str) -> LineageRow:
    r = graph.hash_range(sid)
    return LineageRow(sid, prefix, graph.is_open(sid), graph.parents(sid), r.start, r.end, None, None, None, home)


# -- plain text ---------------------------------------------------------------------------------------


def format_age(seconds: float | None) -> str:
    """``42 s``, ``5 min``, ``2 h 04 min``, ``3 d 02 h``; ``-`` for nothing retained."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def table_cells(row: LineageRow, counted: bool) -> list[str]:
    """The columns after the tree: state, share, bounds, oldest record age (and counts)."""
    if row.shown_under is not None:
        return [row.state, "", f"(merge child, drawn under {row.shown_under})", ""] + (["", ""] if counted else [])
    cells = [row.state, f"{row.share:7.2%}", f"{row.start}..{row.end}", format_age(row.oldest_age_s)]
    if counted:
        cells += [_number(row.records), _number(row.data_bytes)]
    return cells


def headers(counted: bool) -> list[str]:
    return ["shard", "state", "range", "hash keys", "oldest"] + (["records", "bytes"] if counted else [])


def header_line(stream: str, graph: ShardGraph, retention_hours: int) -> str:
    open_n = len(graph.open_shards())
    closed_n = len(graph.shard_ids()) - open_n
    return f"stream {stream}: {open_n} open, {closed_n} closed shards; retention {retention_hours} h"


def row_cells(row: LineageRow, counted: bool) -> list[str]:
    return [row.prefix + row.shard_id, *table_cells(row, counted)]


def _number(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


# -- JSON and Graphviz --------------------------------------------------------------------------------


def as_json(stream: str, retention_hours: int, graph: ShardGraph, rows: Sequence[LineageRow]) -> dict:
    """Hash keys as decimal strings: they exceed what JSON numbers carry exactly."""
    shards = []
    for row in rows:
        if row.shown_under is not None:
            continue
        item = {
            "shardId": row.shard_id, "state": row.state, "parents": list(row.parents),
            "children": sorted(graph.children(row.shard_id), key=shard_sort_key),
            "hashRange": {"start": str(row.start), "end": str(row.end)}, "share": row.share,
            "oldestRecordAgeSeconds": None if row.oldest_age_s is None else round(row.oldest_age_s, 3),
        }
        if row.records is not None:
            item["records"] = row.records
            item["bytes"] = row.data_bytes
        shards.append(item)
    return {"stream": stream, "retentionHours": retention_hours, "shards": shards}


def as_dot(stream: str, rows: Sequence[LineageRow], graph: ShardGraph) -> str:
    """A Graphviz digraph: parents above children, open shards filled."""
    lines = [f'digraph "{_dot_escape(stream)}" {{', "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    for row in rows:
        if row.shown_under is not None:
            continue
        label = f"{row.shard_id}\\n{row.state} {row.share:.2%}"
        if row.records is not None:
            label += f"\\n{row.records:,} records"
        style = ', style=filled, fillcolor="#d8f0d8"' if row.open else ""
        lines.append(f'  "{row.shard_id}" [label="{label}"{style}];')
    for row in rows:
        if row.shown_under is None:
            for parent in row.parents:
                if parent in graph:
                    lines.append(f'  "{parent}" -> "{row.shard_id}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
