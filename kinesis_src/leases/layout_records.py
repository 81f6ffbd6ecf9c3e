"""Where the lease table records and reads its :class:`~.layout.LeaseLayout` (mixed into
:class:`~.table.LeaseTable`; the layout itself, pure, is :mod:`.layout`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..errors import AccessDeniedError
from ..in_place import run_sync
from .layout import MAX_LEASE_PARTITIONS, LeaseLayout, partitions_for
from .schema.keys import HASH_KEY, LEASE_PREFIX, RANGE_KEY, layout_key
from .schema.lease_items import LEASE_PARTITIONS, LeaseCodec, layout_item

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from ..aws.dynamodb import DynamoDBClient, Item

log = logging.getLogger(__name__)


class LayoutRecords:
    """Record the layout once (put-if-absent), read it, and keep it once recorded."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    scope: str
    partition: str
    codec: LeaseCodec
    lease_partitions: int | None
    _layout: LeaseLayout | None

    def layout(self) -> LeaseLayout:
        """:meth:`alayout`, its calls made in place (none once the layout is known)."""
        if self._layout is not None:
            return self._layout
        return run_sync(self.alayout(BotocoreDynamoDB(self.dynamodb)))

    async def alayout(self, dynamodb: AsyncDynamoDB) -> LeaseLayout:
        """The recorded layout; without a record, the single key (an earlier version's leases there
        get their P = 1 recorded now, so later calls need no read)."""
        if self._layout is not None:
            return self._layout
        item = await dynamodb.get_item(self.table_name, self._layout_key())
        if item is not None:
            return self._keep(item)
        if await dynamodb.query(self.table_name, HASH_KEY, self.partition, RANGE_KEY, LEASE_PREFIX, limit=1):
            return await self._record(dynamodb, 1)
        return LeaseLayout(self.partition)

    def known_layout(self) -> LeaseLayout | None:
        """The layout, if recorded and read already (no request); None until then."""
        return self._layout

    def known_partitions(self) -> int:
        """The recorded partition count, without a request (1 while none is known)."""
        return 1 if self._layout is None else self._layout.partitions

    def ensure_layout(self, expected_leases: int | None = None) -> LeaseLayout:
        """:meth:`aensure_layout`, its calls made in place."""
        return run_sync(self.aensure_layout(BotocoreDynamoDB(self.dynamodb), expected_leases))

    async def aensure_layout(self, dynamodb: AsyncDynamoDB, expected_leases: int | None = None) -> LeaseLayout:
        """The layout, recorded now if missing (before the first lease is created): P = 1 over an
        earlier version's leases, else ``lease_partitions``, else one per 1,000 expected leases."""
        layout = await self.alayout(dynamodb)
        if layout.recorded:
            return layout
        return await self._record(dynamodb, self.lease_partitions or partitions_for(expected_leases or 0))

    async def _record(self, dynamodb: AsyncDynamoDB, partitions: int) -> LeaseLayout:
        item = layout_item(self._layout_key(), partitions)
        try:
            if (await dynamodb.put_item(self.table_name, item, "attribute_not_exists(#pk)",
                                        names={"#pk": HASH_KEY})).ok:
                self._layout = LeaseLayout(self.partition, partitions, recorded=True)
                log.info("lease layout of %s: %d partition key(s)", self.partition, partitions)
                return self._layout
        except AccessDeniedError as exc:  # a read-only user (the CLI): the earlier version's single key
            log.debug("could not record the lease layout of %s: %s", self.partition, exc)
            return LeaseLayout(self.partition)
        stored = await dynamodb.get_item(self.table_name, self._layout_key())  # a concurrent first writer's
        return self._keep(stored) if stored is not None else LeaseLayout(self.partition)

    def _keep(self, item: Item) -> LeaseLayout:
        partitions = self.codec.number(item, LEASE_PARTITIONS)
        if not 1 <= partitions <= MAX_LEASE_PARTITIONS:
            raise self.codec.corrupt(item, LEASE_PARTITIONS, f"an integer in 1..{MAX_LEASE_PARTITIONS}", f"is {partitions}")
        if self.lease_partitions is not None and partitions != self.lease_partitions:
            log.warning("lease_partitions=%d ignored: the leases of %s are spread over %d partition key(s) "
                        "already", self.lease_partitions, self.partition, partitions)
        self._layout = LeaseLayout(self.partition, partitions, recorded=True)
        return self._layout

    def _layout_key(self) -> Item:
        return layout_key(self.application, self.stream, self.scope)

