"""Large micro-batch plans live in the lease table; the offset names them by digest.

A plan over :data:`INLINE_MAX_BYTES` of JSON is stored zlib-compressed, in parts, before
``latestOffset`` returns (docs/spark.md, "Large plans and small offsets").
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from ..aws.dynamodb import DynamoDBClient
from ..errors import ConfigurationError
from ..leases.schema.batch_items import plan_body, plan_part_item, plan_parts
from ..leases.schema.keys import HASH_KEY, RANGE_KEY, keys_of, plan_part_prefix, plan_partition
from ..leases.table import LeaseTable
from .offsets import Plan

INLINE_MAX_BYTES = 8 * 1024  # plans up to this size stay in the offset, readable as they are
PART_BYTES = 300_000


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class PlanStore:
    """Compressed plans of one application's stream, in the lease table."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    part_bytes: int = PART_BYTES

    @classmethod
    def of(cls, leases: LeaseTable) -> PlanStore:
        return cls(leases.dynamodb, leases.table_name, leases.application, leases.stream)

    def partition(self, run: str, batch: int) -> str:
        return plan_partition(self.application, self.stream, run, batch)

    def put(self, run: str, batch: int, digest: str, text: str) -> None:
        body = zlib.compress(text.encode(), 6)
        parts = [body[i : i + self.part_bytes] for i in range(0, len(body), self.part_bytes)]
        for i, part in enumerate(parts):
            self.dynamodb.put_item(self.table_name, plan_part_item(self.partition(run, batch), digest, i, part, len(parts)))

    def get(self, run: str, batch: int, digest: str) -> str:
        """The plan's JSON text; ConfigurationError if it is missing, incomplete or not what the digest says."""
        pk = self.partition(run, batch)
        items = self.dynamodb.query(self.table_name, HASH_KEY, pk, RANGE_KEY, plan_part_prefix(digest))
        items.sort(key=lambda item: item[RANGE_KEY]["S"])
        where = f"lease table {self.table_name!r}, key {pk!r} / {digest!r}"
        if not items or len(items) != plan_parts(items[0]):
            raise ConfigurationError(
                f"the checkpoint's offset names a plan that is missing or incomplete in the {where} "
                f"({len(items)} part(s) found). The lease-table items of this query were deleted; start the "
                "query with a new checkpointLocation."
            )
        text = zlib.decompress(b"".join(plan_body(item) for item in items)).decode()
        if digest_of(text) != digest:
            raise ConfigurationError(f"the stored plan in the {where} does not match its digest")
        return text

    def purge_batch(self, run: str, batch: int) -> int:
        pk = self.partition(run, batch)
        items = self.dynamodb.query(self.table_name, HASH_KEY, pk, projection=(HASH_KEY, RANGE_KEY))
        return self.dynamodb.batch_delete(self.table_name, keys_of(items))


class PlanBook:
    """Plans <-> offsets for one driver: inline when small, by reference when large, cached either way."""

    def __init__(self, store: PlanStore | None, inline_max: int = INLINE_MAX_BYTES) -> None:
        self.store = store
        self.inline_max = inline_max
        self._plans: dict[str, Plan] = {}  # digest -> plan, for the batches not yet committed

    def offset_of(self, plan: Plan) -> dict[str, Any]:
        full = plan.to_offset()
        text = json.dumps(full)
        if self.store is None or len(text) <= self.inline_max:
            return full
        digest = digest_of(text)
        if digest not in self._plans:
            self.store.put(plan.run, plan.batch, digest, text)
            self._plans[digest] = plan
        return plan.reference(digest, len(plan.shards))

    def plan_of(self, offset: Mapping[str, Any]) -> Plan:
        digest = Plan.digest_in(offset)
        if digest is None:
            return Plan.from_offset(offset)
        if digest not in self._plans:
            if self.store is None:
                raise ConfigurationError("the checkpoint's offset names a stored plan, but no lease table is open")
            run, batch = Plan.batch_in(offset)
            self._plans[digest] = Plan.from_offset(json.loads(self.store.get(run, batch, digest)))
        return self._plans[digest]

    def forget_before(self, committed: Mapping[str, Any]) -> None:
        """The batch of offset ``committed`` was committed: plans before it are never read again.

        Only a stored plan's commit purges, so plans that shrink inline leave the last one behind.
        """
        run, batch = Plan.batch_in(committed)
        for digest in [d for d, p in self._plans.items() if p.run != run or p.batch < batch]:
            del self._plans[digest]
        if self.store is not None and Plan.digest_in(committed) is not None and batch >= 1:
            self.store.purge_batch(run, batch - 1)
