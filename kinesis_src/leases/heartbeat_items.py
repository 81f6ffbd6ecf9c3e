"""Heartbeat items: a worker's liveness (``worker#<id>``) and the Spark query claim, written by the
lease table (:class:`~.table.LeaseTable` mixes this in). One conditional write per renewal keeps all
of a worker's leases (:mod:`.coordinator`); expiry is judged by observation (:mod:`.expiry`).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from ..aws.server_clock import ttl_after
from ..in_place import run_sync
from ..names import validate_worker_id
from .model import HeartbeatStatus, WorkerHeartbeat
from .schema.keys import HASH_KEY, TTL_ATTRIBUTE, claim_key, worker_key
from .schema.lease_items import (
    HEARTBEAT,
    HEARTBEAT_TTL_S,
    LAST_UPDATED,
    LEASE_CHANGES,
    LEASE_NOTIFY,
    SESSION,
    LeaseCodec,
)
from .schema.values import number_value, string_value, strings_value

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from ..aws.botocore_dynamodb import BotocoreDynamoDB
    from ..aws.dynamodb import DynamoDBClient, Item


class HeartbeatItems:
    """Register, renew, declare dead and remove heartbeats; the same for the query claim."""

    dynamodb: DynamoDBClient
    table_name: str
    application: str
    stream: str
    partition: str
    codec: LeaseCodec
    now_ms: Callable[[], int]
    _in_place: Callable[[], BotocoreDynamoDB]  # from LeaseTable

    def register_worker(self, worker_id: str) -> WorkerHeartbeat:
        return run_sync(self.aregister_worker(self._in_place(), worker_id))

    async def aregister_worker(self, dynamodb: AsyncDynamoDB, worker_id: str) -> WorkerHeartbeat:
        """Write this process's heartbeat item (a new session); a previous process with the id loses."""
        worker = self._new_session(validate_worker_id(worker_id))
        await dynamodb.put_item(self.table_name, self.codec.heartbeat_item(self._worker_key(worker_id), worker,
                                                                           self._ttl_s(dynamodb)))
        return worker

    def heartbeat(self, worker: WorkerHeartbeat, changed: bool = False,
                  notify: tuple[str, ...] = ()) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        return run_sync(self.aheartbeat(self._in_place(), worker, changed, notify))

    async def aheartbeat(self, dynamodb: AsyncDynamoDB, worker: WorkerHeartbeat, changed: bool = False,
                         notify: tuple[str, ...] = ()) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        """Renew; with ``changed``, also announce that this worker changed lease ownership (:mod:`.view`),
        naming the workers the change concerns (``notify``: they read the leases at once)."""
        return await self._beat(dynamodb, self._worker_key(worker.worker_id), worker, changed, notify)

    def declare_worker_dead(self, worker: WorkerHeartbeat) -> bool:
        return run_sync(self.adeclare_worker_dead(self._in_place(), worker))

    async def adeclare_worker_dead(self, dynamodb: AsyncDynamoDB, worker: WorkerHeartbeat) -> bool:
        """Delete a heartbeat observed unchanged for the failover time, if still unchanged."""
        return await self._delete_heartbeat(dynamodb, self._worker_key(worker.worker_id), worker, True)

    def deregister_worker(self, worker: WorkerHeartbeat) -> bool:
        return run_sync(self.aderegister_worker(self._in_place(), worker))

    async def aderegister_worker(self, dynamodb: AsyncDynamoDB, worker: WorkerHeartbeat) -> bool:
        return await self._delete_heartbeat(dynamodb, self._worker_key(worker.worker_id), worker, False)

    # -- the Spark query claim (synchronous callers only) ------------------------------------------

    def read_claim(self) -> WorkerHeartbeat | None:
        """The Spark query claim on this application+stream, if any (see :mod:`.claim`)."""
        item = self.dynamodb.get_item(self.table_name, self._claim_key())
        return None if item is None else self.codec.claim(item)

    def register_claim(self, holder: str) -> WorkerHeartbeat | None:
        """Write the query claim if there is none; None if another query registered it first.
        Put-if-absent, so of two queries that find the claim gone the second learns it at once; a
        retry of our own put that landed finds our session stored: registered."""
        claim = self._new_session(holder)
        item = self.codec.heartbeat_item(self._claim_key(), claim, self._ttl_s(self.dynamodb))
        result = self.dynamodb.put_item(self.table_name, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
        ours = result.item is not None and self.codec.session(result.item) == claim.session
        return claim if result.ok or ours else None

    def renew_claim(self, claim: WorkerHeartbeat) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        return run_sync(self._beat(self._in_place(), self._claim_key(), claim))

    def take_over_claim(self, claim: WorkerHeartbeat) -> bool:
        """Delete a claim observed unchanged for the failover time, if still unchanged."""
        return run_sync(self._delete_heartbeat(self._in_place(), self._claim_key(), claim, True))

    def release_claim(self, claim: WorkerHeartbeat) -> bool:
        return run_sync(self._delete_heartbeat(self._in_place(), self._claim_key(), claim, False))

    # -- the items ------------------------------------------------------------------------------

    def _new_session(self, worker_id: str) -> WorkerHeartbeat:
        return WorkerHeartbeat(worker_id, uuid.uuid4().hex[:12], 0, self.now_ms())

    async def _beat(self, dynamodb: AsyncDynamoDB, key: Item, worker: WorkerHeartbeat, changed: bool = False,
                    notify: tuple[str, ...] = ()) -> tuple[HeartbeatStatus, WorkerHeartbeat]:
        """Add one to the stored heartbeat, conditional on our session only; the new value is read
        from the answer (ALL_NEW). Every write moves what the others watch, a retry included."""
        now = self.now_ms()
        names = {"#hb": HEARTBEAT, "#updated": LAST_UPDATED, "#ttl": TTL_ATTRIBUTE, "#session": SESSION}
        values = {":one": number_value(1), ":now": number_value(now), ":ttl": number_value(self._ttl_s(dynamodb)),
                  ":session": string_value(worker.session)}
        update = "SET #updated = :now, #ttl = :ttl"
        if changed:  # an announcement names whom it concerns, or nobody (an older announcement's are stale)
            names["#changes"], names["#notify"] = LEASE_CHANGES, LEASE_NOTIFY
            if notify:
                update += ", #notify = :notify"
                values[":notify"] = strings_value(notify)
            else:
                update += " REMOVE #notify"
        update += " ADD #hb :one" + (", #changes :one" if changed else "")
        result = await dynamodb.update_item(self.table_name, key, update, "#session = :session", names=names,
                                            values=values)
        if result.ok and result.item:
            beat, changes = self.codec.heartbeat_value(result.item), self.codec.changes_value(result.item)
            return HeartbeatStatus.RENEWED, replace(worker, heartbeat=beat, last_updated_ms=now, changes=changes)
        if result.item is not None and self.codec.session(result.item) != worker.session:
            return HeartbeatStatus.REPLACED, worker
        return HeartbeatStatus.DECLARED_DEAD, worker

    async def _delete_heartbeat(self, dynamodb: AsyncDynamoDB, key: Item, worker: WorkerHeartbeat,
                                check_heartbeat: bool) -> bool:
        """A heartbeat's delete: only of this session, and (declaring it dead) only if still unchanged."""
        condition = "#session = :session"
        names = {"#session": SESSION}
        values = {":session": string_value(worker.session)}
        if check_heartbeat:
            condition += " AND #hb = :hb"
            names["#hb"] = HEARTBEAT
            values[":hb"] = number_value(worker.heartbeat)
        return (await dynamodb.delete_item(self.table_name, key, condition, names=names, values=values)).ok

    def _ttl_s(self, writer: AsyncDynamoDB | DynamoDBClient) -> int:
        """``ttl`` of a heartbeat or claim item: a day after now, on the clock of the client that
        writes it (docs/leases.md, "TTL on DynamoDB's clock")."""
        return ttl_after(writer.server_time_s(), self.now_ms() / 1000, HEARTBEAT_TTL_S)

    def _worker_key(self, worker_id: str) -> Item:
        return worker_key(self.partition, worker_id)

    def _claim_key(self) -> Item:
        return claim_key(self.application, self.stream)

