"""Splitting a unit's leases into its pieces' leases, and waiting for a unit's readers to leave.

Per shard, one transaction deletes the unit's lease (fenced) and puts each piece's at the unit's
checkpoint; every step is idempotent (docs/consumer.md, "Sticky key ranges": the cut-over)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Awaitable, Callable, Collection, Iterable

from lineage import KeyRange

from ..clock import since_boot
from ..errors import KinesisSourceError
from ..in_place import pause
from ..leases.layout import LeaseLayout
from ..leases.listener import SyncsShards
from ..leases.model import Lease
from ..leases.schema.keys import lease_key
from ..leases.schema.lease_items import LEASE_COUNTER, LEASE_OWNER
from ..leases.shard_sync import SyncReport
from ..leases.table import LeaseTable
from .range_claims import RangeClaims, observe_live
from .units import Split, UnitMap, describe, scope_of, unit_of_scope

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB

log = logging.getLogger(__name__)
Beat = Callable[[], Awaitable[object]]  # renews the caller's own claim during a long wait

MAX_ROUNDS = 20
READERS_WAIT_FAILOVERS = 10  # how many failover times a split waits for a unit's readers to leave


def unit_table(claims: RangeClaims, scope: str) -> LeaseTable:
    """The lease set of the unit ``scope`` names, on the stream and table of ``claims``."""
    return LeaseTable(claims.dynamodb, claims.table_name, claims.application, claims.stream, scope=scope)


async def wait_until_unread(table: LeaseTable, dynamodb: AsyncDynamoDB, failover_s: float,
                            except_workers: Collection[str] = (), beat: Beat | None = None,
                            clock: Callable[[], float] = since_boot,
                            sleep: Callable[[float], object] | None = None) -> None:
    """Return once no live worker (but ``except_workers``) has a heartbeat in ``table``'s set.

    KinesisSourceError naming them if they stay ``READERS_WAIT_FAILOVERS`` failover times (a
    worker of a version without units never leaves). ``sleep`` waits on ``clock`` (a test's)."""
    async def heartbeats() -> dict[str, tuple[str, int]]:
        return {w.worker_id: (w.session, w.heartbeat) for w in (await table.alist_workers(dynamodb)).values()
                if w.worker_id not in except_workers}

    deadline = clock() + READERS_WAIT_FAILOVERS * failover_s
    while True:
        readers = await heartbeats()
        if not readers or not await observe_live({w: w for w in readers}, heartbeats, failover_s, clock,
                                                 beat=beat, sleep=sleep, found=readers):
            return
        if clock() >= deadline:
            raise KinesisSourceError(
                f"stream {table.stream!r} (application {table.application!r}): {describe(unit_of_scope(table.scope))} "
                f"is still read by {', '.join(map(repr, sorted(readers)))} after {READERS_WAIT_FAILOVERS} failover "
                "times; workers of a version without units never hand it over: upgrade or stop them"
            )
        await pause(min(0.2, failover_s / 10), sleep)


async def split_unit(dynamodb: AsyncDynamoDB, claims: RangeClaims, split: Split, worker_id: str,
                     beat: Beat | None = None) -> int:
    """Split every lease of ``split.unit`` into its pieces' leases; returns how many shards were split."""
    table = unit_table(claims, scope_of(split.unit))
    await wait_until_unread(table, dynamodb, claims.failover_s, (), beat)
    pieces = [unit_table(claims, scope_of(p)) for p in split.pieces]
    done = 0
    for lease in await table.alist_leases(dynamodb):
        done += await _split_lease(dynamodb, table, await table.alayout(dynamodb), pieces, lease, worker_id)
        if beat is not None:
            await beat()
    log.info("stream %r (application %r): %s split into %s at %d shard checkpoint(s)", claims.stream,
             claims.application, describe(split.unit), ", ".join(map(str, split.pieces)), done)
    return done


async def _split_lease(dynamodb: AsyncDynamoDB, table: LeaseTable, layout: LeaseLayout, pieces: list[LeaseTable],
                       lease: Lease | None, worker_id: str) -> int:
    """One shard's cut-over; 0 if it was split meanwhile by someone else."""
    for _ in range(MAX_ROUNDS):
        if lease is None:
            return 0
        if lease.owner != worker_id:
            lease = (await table.atake_lease(dynamodb, lease, worker_id)
                     or await table.aget_lease(dynamodb, lease.shard_id))
            continue
        actions = [_delete_held(table, layout, lease)] + [
            _put_new(piece, await piece.aensure_layout(dynamodb), lease) for piece in pieces
            if await piece.aget_lease(dynamodb, lease.shard_id) is None
        ]
        if (await dynamodb.transact_write(table.table_name, actions)).committed:
            return 1
        lease = await table.aget_lease(dynamodb, lease.shard_id)
    raise KinesisSourceError(
        f"could not split the lease of shard {lease.shard_id if lease else '?'} of stream {table.stream!r}: it kept "
        f"changing for {MAX_ROUNDS} rounds; retry"
    )


def _delete_held(table: LeaseTable, layout: LeaseLayout, lease: Lease) -> dict:
    return {
        "Delete": {
            "TableName": table.table_name,
            "Key": lease_key(layout.partition_of(lease.shard_id), lease.shard_id),
            "ConditionExpression": "#counter = :cur AND #owner = :owner",
            "ExpressionAttributeNames": {"#counter": LEASE_COUNTER, "#owner": LEASE_OWNER},
            "ExpressionAttributeValues": {":cur": {"N": str(lease.counter)}, ":owner": {"S": lease.owner}},
        }
    }


def _put_new(piece: LeaseTable, layout: LeaseLayout, lease: Lease) -> dict:
    """The piece's lease of the shard, unowned, at the unit's checkpoint (put if absent)."""
    fresh = replace(lease, owner=None, counter=0, owner_switches_since_checkpoint=0, throughput=None)
    creation = piece.creation(layout, fresh)
    return {"Put": {"TableName": creation["table"], "Item": creation["item"],
                    "ConditionExpression": creation["condition"], "ExpressionAttributeNames": creation["names"]}}


class UnitShardSync:
    """A unit's shard sync that does nothing once the unit is retired (split, or being split).

    A reader paused through the split must not sync the emptied set when it resumes: it would be
    synced afresh, at the initial position, and read again. Housekeeping stops it next tick."""

    def __init__(self, sync: SyncsShards, unit: KeyRange, read_units: Callable[[], Awaitable[UnitMap]]) -> None:
        self.sync = sync
        self.unit = unit
        self.read_units = read_units

    async def arun(self, leases: Iterable[Lease] | None = None) -> object:
        units = await self.read_units()
        if self.unit not in units.units or any(s.unit == self.unit for s in units.splits):
            log.info("shard sync of %s skipped: it was split (or is being split) into other units",
                     describe(self.unit))
            return SyncReport((), (), (), 0)
        return await self.sync.arun(leases)
