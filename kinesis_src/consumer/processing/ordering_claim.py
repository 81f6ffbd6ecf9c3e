"""One ordering mode per application and stream, recorded in the lease table by the first worker.

A ``"key"`` worker keeps a key's order only if the worker before it on the shard did, so another
mode fails before anything is read (to change modes: docs/processing.md, "Guarantees")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ConfigurationError
from ...leases.schema.consumer_items import ordering_item, recorded_ordering
from ...leases.schema.keys import HASH_KEY, ordering_key, ordering_partition
from .options import Ordering

if TYPE_CHECKING:
    from ...aws.async_dynamodb import AsyncDynamoDB

__all__ = ["claim_ordering", "ordering_key"]


async def claim_ordering(
    dynamodb: AsyncDynamoDB, table: str, application: str, stream: str, ordering: Ordering, worker_id: str
) -> None:
    """Record ``ordering`` for (application, stream), or check it against the one recorded first."""
    item = ordering_item(application, stream, ordering.value, worker_id)
    result = await dynamodb.put_item(table, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
    if result.ok:
        return
    stored = result.item or await dynamodb.get_item(table, ordering_key(application, stream)) or {}
    first, by = recorded_ordering(stored)
    if first == ordering.value:
        return
    raise ConfigurationError(
        f"ordering={ordering.value!r} conflicts with ordering={first!r}, which application {application!r} "
        f"already uses on stream {stream!r} (recorded by {by or 'an earlier worker'} in lease table {table!r}, "
        f"item {ordering_partition(application, stream)}). Every worker of one application must use the same "
        f"ordering: pass ordering={first!r}, or stop every worker and delete that item to change the mode"
    )
