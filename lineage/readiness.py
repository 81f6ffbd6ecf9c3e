"""The one readiness rule of parent-first reading: a shard may be read once its parents are done.

A parent is done when drained or unknown; the shard graph and the lease assignment share it.
"""


from __future__ import annotations

from collections.abc import Container, Iterable


def parents_done(parents: Iterable[str], known: Container[str], done: Container[str]) -> bool:
    """True when every parent is in ``done`` or not in ``known`` (no parents: True)."""
    return all(p in done or p not in known for p in parents)
