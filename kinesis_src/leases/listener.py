"""What a lease coordinator tells the process using its leases, and what it needs from shard sync."""

from __future__ import annotations

from typing import Iterable, Protocol

from .model import Lease


class LeaseListener(Protocol):
    """What the process using the leases (a consumer) is told, where the coordinator runs: keep
    the calls short. ``before_release`` runs before a graceful release (shedding, shutdown), and
    the release waits for it: checkpoint there."""

    def on_acquired(self, lease: Lease) -> None: ...

    def on_lost(self, lease: Lease, reason: str) -> None: ...

    async def before_release(self, lease: Lease) -> None: ...


class NoListener:
    def on_acquired(self, lease: Lease) -> None:
        return None

    def on_lost(self, lease: Lease, reason: str) -> None:
        return None

    async def before_release(self, lease: Lease) -> None:
        return None


class SyncsShards(Protocol):
    """What the coordinator needs from :class:`~.shard_sync.ShardSync`: one sync, awaited."""

    async def arun(self, leases: Iterable[Lease] | None = None) -> object: ...
