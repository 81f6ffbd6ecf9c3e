"""SHARD_END: the parent marked ended and unowned, and its child leases created, in one transaction
fenced on the parent's owner and counter (mixed into :class:`~.table.LeaseTable`)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import KinesisSourceError
from ..in_place import run_sync
from .layout import LeaseLayout
from .model import Checkpoint, CheckpointKind, Lease, ShardEndResult
from .schema.keys import HASH_KEY
from .schema.lease_items import LeaseCodec
from .schema.values import string_value, strings_value

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from ..aws.dynamodb import DynamoDBClient, Item

log = logging.getLogger(__name__)


class ShardEndWrites:
    """:meth:`mark_shard_end` and what it needs to tell a retry of its own write from a lost lease."""

    dynamodb: DynamoDBClient
    table_name: str
    codec: LeaseCodec

    now_ms: Callable[[], int]
    # and, from LeaseTable: _held_request (the fenced update), aensure_layout, lost_error, _in_place

    def mark_shard_end(self, lease: Lease, children: Sequence[Lease]) -> ShardEndResult:
        return run_sync(self.amark_shard_end(self._in_place(), lease, children))

    async def amark_shard_end(self, dynamodb: AsyncDynamoDB, lease: Lease, children: Sequence[Lease],
                              ) -> ShardEndResult:
        """Mark the parent SHARD_END and unowned and create its child leases in one transaction,
        fenced on the parent's owner and counter; by ``dynamodb`` on the caller's loop, or in place.
        A child that exists is left out; a retry of our own write that landed is a success."""
        ids = tuple(c.shard_id for c in children) or lease.child_shard_ids
        now, layout = self.now_ms(), await self.aensure_layout(dynamodb)
        parent = self._held_request(
            lease,
            "SET #cp = :end, #sub = :zero, #children = :children, #counter = :next, #switches = :zero, "
            "#updated = :now REMOVE #owner, #cpts, #req",
            {":end": string_value(CheckpointKind.SHARD_END.value), ":children": strings_value(ids)},
            now, layout,
        )
        parent["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        pending, existing = list(children), []
        while True:
            actions = [{"Update": parent}, *({"Put": self._child_put(c, now, layout)} for c in pending)]
            outcome = await dynamodb.transact_write(self.table_name, actions)
            if outcome.committed:
                ended = self._ended(lease, ids, now)
                return ShardEndResult(ended, tuple(c.shard_id for c in pending), tuple(existing))
            parent_reason = outcome.reasons[0] if outcome.reasons else "unknown"
            if parent_reason != "None":
                return self._shard_end_landed(lease, ids, outcome.items[0] if outcome.items else None, parent_reason)
            exists = self._existing_children(outcome.reasons[1:], pending)
            existing.extend(exists)
            pending = [c for c in pending if c.shard_id not in exists]

    def _child_put(self, child: Lease, now: int, layout: LeaseLayout) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "Item": self.codec.lease_item(layout.partition_of(child.shard_id), replace(child, last_updated_ms=now)),
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": HASH_KEY},
        }

    def _existing_children(self, reasons: Sequence[str], pending: Sequence[Lease]) -> list[str]:
        """The children whose put-if-absent failed: they exist. Any other reason is an error."""
        exists = [child.shard_id for child, code in zip(pending, reasons) if code == "ConditionalCheckFailed"]
        unexpected = sorted({code for code in reasons if code not in ("None", "ConditionalCheckFailed")})
        if unexpected or not exists:
            raise KinesisSourceError(
                f"SHARD_END transaction on table {self.table_name!r} cancelled for reasons "
                f"{', '.join(unexpected) or 'none given'} on the child leases {[c.shard_id for c in pending]}"
            )
        return exists

    def _ended(self, lease: Lease, ids: tuple[str, ...], now: int) -> Lease:
        """The parent as the committed transaction wrote it (transactions return no item)."""
        return replace(
            lease, checkpoint=Checkpoint.shard_end(), owner=None, counter=lease.counter + 1,
            child_shard_ids=ids, owner_switches_since_checkpoint=0, last_updated_ms=now,
            steal_requested_by=None,
        )

    def _shard_end_landed(self, lease: Lease, ids: tuple[str, ...], current: Item | None, reason: str) -> ShardEndResult:
        """The parent's condition failed: success if the item is our own landed SHARD_END, else lost."""
        if reason != "ConditionalCheckFailed":
            raise KinesisSourceError(f"SHARD_END transaction on table {self.table_name!r} cancelled: {reason}")
        stored = None if current is None else self.codec.lease(current)
        if stored is None or stored != self._ended(lease, ids, stored.last_updated_ms):  # not our own write
            raise self.lost_error(lease, current, "SHARD_END")
        log.info("SHARD_END of %s had landed already (a retried write): %s", lease.shard_id, stored.describe())
        return ShardEndResult(stored, (), ids)

