"""The KCL import's refusals that compare reads: a KCL worker still running, another stream's table.

Pure: they judge values already read (two reads of the KCL table, the stream's summary and
listing) and raise naming the thing and the fix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lineage import ShardGraph, shard_sort_key

from ..aws.kinesis import StreamSummary
from .kcl_items import (
    KclApplicationRunningError,
    KclCheckpointKind,
    KclLease,
    KclStreamMismatchError,
)

_SHOWN = 5  # problems named in one message


def check_quiet(table: str, first: Mapping[str, KclLease], last: Mapping[str, KclLease], observed_s: float) -> None:
    """Refuse if any lease changed between two reads ``observed_s`` apart: a KCL worker renewed or took it."""
    changed = sorted(key for key in set(first) | set(last)
                     if key not in first or key not in last or first[key].activity() != last[key].activity())
    if not changed:
        return
    shown = ", ".join(_change(key, first.get(key), last.get(key)) for key in changed[:_SHOWN])
    raise KclApplicationRunningError(
        f"the KCL application of table {table!r} is still running: within {observed_s:g} s, {len(changed)} "
        f"lease(s) changed ({shown}{', ...' if len(changed) > _SHOWN else ''}). Stop every KCL worker of the "
        "application, then import again; if its failoverTimeMillis is above 10 s, observe for at least twice "
        "that (--observe-s)."
    )


def _change(key: str, before: KclLease | None, after: KclLease | None) -> str:
    if before is None:
        return f"{key} created"
    if after is None:
        return f"{key} deleted"
    if before.counter != after.counter:
        return f"{key} leaseCounter {before.counter} -> {after.counter}, owner {after.owner or 'none'}"
    return f"{key} owner/checkpoint changed, owner {after.owner or 'none'}"


def leases_of_stream(table: str, leases: Iterable[KclLease], summary: StreamSummary) -> list[KclLease]:
    """The leases for the stream: all of a single-stream table; a multi-stream table's for this stream,
    whose account and creation time must be the stream's."""
    leases = list(leases)
    multi = [l for l in leases if l.stream is not None]
    if not multi:
        return leases
    ours = [l for l in multi if l.stream.name == summary.name]  # type: ignore[union-attr]
    if not ours:
        found = sorted({str(l.stream) for l in multi})
        raise KclStreamMismatchError(
            f"KCL table {table!r} is a multi-stream table with leases for {', '.join(found[:_SHOWN])}, none for "
            f"stream {summary.name!r}: name the stream the KCL application read (--stream), or its lease table"
        )
    account = summary.arn.split(":")[4] if summary.arn.count(":") >= 5 else None
    created = None if summary.created is None else int(summary.created.timestamp())
    for lease in ours:
        sid = lease.stream
        assert sid is not None
        if (account is not None and sid.account != account) or (created is not None and sid.creation_epoch != created):
            raise KclStreamMismatchError(
                f"KCL table {table!r} has leases for stream {sid} (account:name:creation epoch), but stream "
                f"{summary.name!r} is {summary.arn} created at epoch {created}: it was deleted and created again, "
                "or is another account's. Its checkpoints cannot be used; start the application fresh instead."
            )
    return ours


def check_stream(table: str, stream: str, leases: list[KclLease], graph: ShardGraph) -> None:
    """Refuse leases that cannot be the stream's: shard ids, hash ranges, parents and sequence numbers."""
    problems = [p for lease in leases for p in _problems(lease, graph)]
    if not any(lease.shard_id in graph for lease in leases):
        problems.append(f"none of its {len(leases)} lease(s) names a shard of stream {stream!r}")
    if problems:
        shown = "; ".join(problems[:_SHOWN])
        raise KclStreamMismatchError(
            f"KCL table {table!r} does not look like stream {stream!r}'s lease table: {shown}"
            f"{'; ...' if len(problems) > _SHOWN else ''}. Check --stream and --kcl-table (a single-stream KCL "
            "table does not name its stream: it is compared with the stream's shards)."
        )


def _problems(lease: KclLease, graph: ShardGraph) -> list[str]:
    shard = lease.shard_id
    if shard not in graph:
        newest = graph.max_shard_id()
        if newest is None or shard_sort_key(shard) > shard_sort_key(newest):
            return [f"{shard} is not a shard of the stream"]
        return []  # older than a listed shard: trimmed past retention
    problems = []
    listed = graph.hash_range(shard)
    if lease.hash_range is not None and lease.hash_range != listed:
        problems.append(f"{shard} covers hash keys {lease.hash_range.start}-{lease.hash_range.end} there, "
                        f"{listed.start}-{listed.end} in the stream")
    parents = tuple(sorted(graph.parents(shard), key=shard_sort_key))
    if lease.parent_shard_ids != parents:
        problems.append(f"{shard} has parents [{', '.join(lease.parent_shard_ids)}] there, "
                        f"[{', '.join(parents)}] in the stream")
    if lease.kind is KclCheckpointKind.SEQUENCE_NUMBER and not _in_range(lease.checkpoint, graph, shard):
        problems.append(f"{shard}'s checkpoint {lease.checkpoint} is outside the shard's sequence numbers")
    return problems


def _in_range(sequence: str, graph: ShardGraph, shard: str) -> bool:
    """Within the shard's listed sequence numbers. An ending number below the starting one bounds nothing:
    kinesis-mock lists every closed shard's EndingSequenceNumber as 2**63-1, below its real numbers."""
    first = int(graph.starting_sequence_number(shard))
    last = graph.ending_sequence_number(shard)
    upper = int(last) if last is not None and int(last) >= first else None
    return first <= int(sequence) and (upper is None or int(sequence) <= upper)
