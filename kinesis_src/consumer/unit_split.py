"""Splitting a unit's leases into its pieces' leases, and waiting for a unit's readers to leave.

Per shard, one transaction deletes the unit's lease (fenced) and puts each piece's at the unit's
checkpoint; every step is idempotent (docs/consumer.md, "Sticky key ranges": the cut-over)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Awaitable, Callable, Collection, Iterable

from lineage import KeyRange

from ..aws import DynamoDBClient
from ..clock import since_boot
from ..errors import KinesisSourceError
from ..leases.listener import SyncsShards
from ..leases.model import Lease
from ..leases.schema.keys import HASH_KEY, lease_key
from ..leases.schema.lease_items import LEASE_COUNTER, LEASE_OWNER
from ..leases.shard_sync import SyncReport
from ..leases.table import LeaseTable
from .range_claims import observe_live
from .units import Split, UnitMap, describe, scope_of, unit_of_scope

log = logging.getLogger(__name__)

MAX_ROUNDS = 20
READERS_WAIT_FAILOVERS = 10  # how many failover times a split waits for a unit's readers to leave


def unit_table(dynamodb: DynamoDBClient, table_name: str, application: str, stream: str, scope: str) -> LeaseTable:
    return LeaseTable(dynamodb, table_name, application, stream, scope=scope)


def wait_until_unread(table: LeaseTable, failover_s: float, except_workers: Collection[str] = (),
                      beat: Callable[[], object] | None = None, clock: Callable[[], float] = since_boot,
                      sleep: Callable[[float], object] = time.sleep) -> None:
    """Return once no live worker (but ``except_workers``) has a heartbeat in ``table``'s set.

    KinesisSourceError naming them if they stay ``READERS_WAIT_FAILOVERS`` failover times (a
    worker of a version without units never leaves). ``sleep`` waits on ``clock``: pass both."""
    def heartbeats() -> dict[str, tuple[str, int]]:
        return {w.worker_id: (w.session, w.heartbeat) for w in table.list_workers().values()
                if w.worker_id not in except_workers}

    deadline = clock() + READERS_WAIT_FAILOVERS * failover_s
    while True:
        readers = heartbeats()
        if not readers or not observe_live({w: w for w in readers}, heartbeats, failover_s, clock, beat=beat,
                                           sleep=sleep, found=readers):
            return
        if clock() >= deadline:
            raise KinesisSourceError(
                f"stream {table.stream!r} (application {table.application!r}): {describe(unit_of_scope(table.scope))} "
                f"is still read by {', '.join(map(repr, sorted(readers)))} after {READERS_WAIT_FAILOVERS} failover "
                "times; workers of a version without units never hand it over: upgrade or stop them"
            )
        sleep(min(0.2, failover_s / 10))


def split_unit(dynamodb: DynamoDBClient, table_name: str, application: str, stream: str, split: Split,
               worker_id: str, failover_s: float, beat: Callable[[], object] | None = None) -> int:
    """Split every lease of ``split.unit`` into its pieces' leases; returns how many shards were split."""
    table = unit_table(dynamodb, table_name, application, stream, scope_of(split.unit))
    wait_until_unread(table, failover_s, (), beat)
    pieces = [unit_table(dynamodb, table_name, application, stream, scope_of(p)) for p in split.pieces]
    done = 0
    for lease in table.list_leases():
        done += _split_lease(table, pieces, lease, worker_id)
        if beat is not None:
            beat()
    log.info("stream %r (application %r): %s split into %s at %d shard checkpoint(s)", stream, application,
             describe(split.unit), ", ".join(map(str, split.pieces)), done)
    return done


def _split_lease(table: LeaseTable, pieces: list[LeaseTable], lease: Lease | None, worker_id: str) -> int:
    """One shard's cut-over; 0 if it was split meanwhile by someone else."""
    for _ in range(MAX_ROUNDS):
        if lease is None:
            return 0
        if lease.owner != worker_id:
            lease = table.take_lease(lease, worker_id) or table.get_lease(lease.shard_id)
            continue
        actions = [_delete_held(table, lease)] + [
            _put_new(piece, lease) for piece in pieces if piece.get_lease(lease.shard_id) is None
        ]
        if table.dynamodb.transact_write(table.table_name, actions).committed:
            return 1
        lease = table.get_lease(lease.shard_id)
    raise KinesisSourceError(
        f"could not split the lease of shard {lease.shard_id if lease else '?'} of stream {table.stream!r}: it kept "
        f"changing for {MAX_ROUNDS} rounds; retry"
    )


def _delete_held(table: LeaseTable, lease: Lease) -> dict:
    return {
        "Delete": {
            "TableName": table.table_name,
            "Key": lease_key(table.layout().partition_of(lease.shard_id), lease.shard_id),
            "ConditionExpression": "#counter = :cur AND #owner = :owner",
            "ExpressionAttributeNames": {"#counter": LEASE_COUNTER, "#owner": LEASE_OWNER},
            "ExpressionAttributeValues": {":cur": {"N": str(lease.counter)}, ":owner": {"S": lease.owner}},
        }
    }


def _put_new(piece: LeaseTable, lease: Lease) -> dict:
    """The piece's lease of the shard, unowned, at the unit's checkpoint (put if absent)."""
    fresh = replace(lease, owner=None, counter=0, owner_switches_since_checkpoint=0, throughput=None,
                    last_updated_ms=int(time.time() * 1000))
    partition = piece.ensure_layout().partition_of(lease.shard_id)
    return {
        "Put": {
            "TableName": piece.table_name, "Item": piece.codec.lease_item(partition, fresh),
            "ConditionExpression": "attribute_not_exists(#pk)", "ExpressionAttributeNames": {"#pk": HASH_KEY},
        }
    }


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
