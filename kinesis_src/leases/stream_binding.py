"""Bind an application's leases to one stream identity (ARN + creation time).

Leases are keyed by stream *name*, and a stream created again under that name reuses shard ids,
so a worker refuses a stream other than the one recorded (docs/leases.md, "Stream identity")."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..identity import StreamIdentity, check_same_stream
from ..in_place import run_sync
from .schema.keys import HASH_KEY, identity_key, identity_partition, lease_partition
from .schema.lease_items import identity_item
from .table import LeaseTable

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB

log = logging.getLogger(__name__)


def bind_stream(table: LeaseTable, current: StreamIdentity) -> StreamIdentity:
    """:func:`abind_stream` for synchronous callers, in place."""
    return run_sync(abind_stream(table, current, BotocoreDynamoDB(table.dynamodb)))


async def abind_stream(table: LeaseTable, current: StreamIdentity, dynamodb: AsyncDynamoDB) -> StreamIdentity:
    """Record ``current`` as this application's stream, or check it against the one recorded:
    :class:`~kinesis_src.errors.StreamRecreatedError` if the leases belong to another stream. A
    table made before identities were recorded adopts ``current``."""
    key = identity_key(table.application, table.stream)
    item = identity_item(key, current)
    while True:
        result = await dynamodb.put_item(table.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
        if result.ok:
            log.info("lease table %r: application %r reads %s", table.table_name, table.application,
                     current.describe())
            return current
        stored = result.item or await dynamodb.get_item(table.table_name, key)
        if stored is not None:  # else deleted between the two requests: bind again
            break
    recorded = table.codec.identity(stored)
    check_same_stream(
        recorded,
        current,
        f"lease table {table.table_name!r} (application {table.application!r})",
        f"To start over from the initial position, use a new application_name, or delete the "
        f"application's items for this stream (partition keys {lease_partition(table.application, table.stream)} "
        f"and {identity_partition(table.application, table.stream)}).",
    )
    return recorded
