"""Exceptions raised by the lineage package, all under :class:`LineageError` (a ``ValueError``).

Each keeps the offending shard id and values as attributes as well as in its message.
"""

from __future__ import annotations

from typing import Any


class LineageError(ValueError):
    """Root of every error raised by :mod:`lineage`."""


class MalformedShardError(LineageError):
    """A shard description (a ListShards dict) is missing a field or has a bad value."""

    def __init__(self, shard_id: str | None, field: str, value: Any, reason: str) -> None:
        self.shard_id = shard_id
        self.field = field
        self.value = value
        self.reason = reason
        who = f"shard {shard_id}" if shard_id is not None else "shard without a valid ShardId"
        super().__init__(f"malformed {who}: field {field} = {_short(value)}: {reason}")


class LineageConflictError(LineageError):
    """A listing changed an immutable attribute of a known shard (only EndingSequenceNumber may)."""

    def __init__(self, shard_id: str, attribute: str, old: Any, new: Any) -> None:
        self.shard_id = shard_id
        self.attribute = attribute
        self.old = old
        self.new = new
        super().__init__(
            f"conflicting listing for shard {shard_id}: {attribute} was {_short(old)}, "
            f"new listing says {_short(new)}"
        )


class ParentConflictError(LineageConflictError):
    """A listing gave a known shard different parents than before."""


class LineageCycleError(LineageError):
    """Parent links form a cycle (a shard would be its own ancestor)."""

    def __init__(self, cycle: tuple[str, ...]) -> None:
        self.cycle = cycle
        path = " -> ".join((*cycle, cycle[0]))
        super().__init__(
            f"shard lineage has a cycle through {len(cycle)} shard(s) "
            f"(child -> parent): {path}"
        )


class HashSpaceError(LineageError):
    """The open shards do not tile the hash key space exactly.

    ``gaps``: uncovered ranges; ``overlaps``: ``(shard_a, range_a, shard_b, range_b)``.
    """

    def __init__(self, gaps: tuple[Any, ...], overlaps: tuple[tuple[Any, ...], ...]) -> None:
        self.gaps = gaps
        self.overlaps = overlaps
        problems = [f"gap {gap}" for gap in gaps]
        problems += [f"overlap {a} {ra} with {b} {rb}" for a, ra, b, rb in overlaps]
        shown = "; ".join(problems[:10])
        more = f"; and {len(problems) - 10} more" if len(problems) > 10 else ""
        super().__init__(f"open shards do not tile the hash key space: {shown}{more}")


class KeyRangeError(LineageError):
    """A sticky key range (``KeyRange``, ``hashKeyRange``, ``key_range``) is malformed or out of the space."""


class NoOwnerError(LineageError, LookupError):
    """No open shard holds a hash key (the graph is empty, partial or mid-reshard)."""

    def __init__(self, hash_key: int, detail: str) -> None:
        self.hash_key = hash_key
        super().__init__(f"no open shard holds hash key {hash_key}: {detail}")


class UnknownShardError(LineageError, KeyError):
    """A query named a shard id the graph has never seen (also a ``KeyError``, for mappings)."""


    def __init__(self, shard_id: str) -> None:
        self.shard_id = shard_id
        super().__init__(f"unknown shard {shard_id!r}")

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message and add stray quotes.
        return str(self.args[0])


class LineageFormatError(LineageError):
    """Serialized lineage (``from_json`` input) is not a graph this version can read."""


def _short(value: Any, limit: int = 200) -> str:
    """repr() a value, truncated so a huge bad input cannot flood the log."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
