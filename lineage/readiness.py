"""The one readiness rule of parent-first reading: a shard may be read once its parents are done.

A parent is done when it is drained (read to its end), or unknown: Kinesis
trims shards past retention, and a lease table cleans up finished leases, so a
child may name a parent that will never be seen again. The shard graph and
the lease assignment both ask this one function, each with its own notion of
"known" (listed; has a lease) and "done" (drained; at SHARD_END).
"""

from __future__ import annotations

from collections.abc import Container, Iterable


def parents_done(parents: Iterable[str], known: Container[str], done: Container[str]) -> bool:
    """True when every parent is in ``done`` or not in ``known`` (no parents: True)."""
    return all(p in done or p not in known for p in parents)
