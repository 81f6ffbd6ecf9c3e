"""Who reads which sticky key range of a stream: claims with heartbeats, in the lease table.

Claims register one at a time through a version item (``version + 1``, one transaction): of two
overlapping workers starting at once, one commits (docs/consumer.md, "Sticky key ranges")."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, TypeVar

from lineage import KeyRange

from ..aws import DynamoDBClient
from ..aws.botocore_dynamodb import BotocoreDynamoDB
from ..aws.dynamodb import Item
from ..aws.server_clock import ttl_after
from ..clock import since_boot
from ..errors import KeyRangeInUseError, KinesisSourceError
from ..in_place import pause, run_sync
from ..leases.expiry import ExpiryJudge, Watch
from ..leases.schema.consumer_items import HEARTBEAT, SESSION, VERSION, range_claim_fields, range_claim_item
from ..leases.schema.keys import HASH_KEY, RANGE_KEY
from ..leases.schema.keys import RANGE_CLAIM_PREFIX as CLAIM_PREFIX
from ..leases.schema.keys import RANGE_VERSION_KEY as VERSION_KEY
from ..leases.schema.keys import TTL_ATTRIBUTE as TTL
from ..leases.schema.keys import range_claim_key, range_version_key, ranges_partition
from . import unit_registry
from .units import UnitMap

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from .consumer_config import ConsumerConfig

log = logging.getLogger(__name__)

CLAIM_TTL_S = 24 * 3600  # garbage collection of dead workers' claims only; never used for liveness
MAX_ROUNDS = 20
K = TypeVar("K")


@dataclass(frozen=True)
class RangeClaim:
    """One worker's claim of a key range on one stream; ``order`` is its place in claim order."""

    worker_id: str
    key_range: KeyRange
    session: str
    heartbeat: int
    order: int

    @property
    def beat(self) -> tuple[str, int]:
        """What its liveness is judged on: (session, heartbeat)."""
        return self.session, self.heartbeat

    def describe(self) -> str:
        return f"worker {self.worker_id!r} claims key range {self.key_range} (claim #{self.order})"


class RangeClaims:
    """The key-range claims of one application's stream, and this worker's own claim in it.

    Each operation is a coroutine awaiting ``dynamodb`` (the consumer's async client); the plain
    names run it in place on the claims' own client (:func:`~kinesis_src.in_place.run_sync`).
    """

    def __init__(self, dynamodb: DynamoDBClient, table_name: str, application: str, stream: str,
                 failover_s: float, clock: Callable[[], float] = since_boot,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.dynamodb = dynamodb
        self.table_name = table_name
        self.application = application
        self.stream = stream
        self.failover_s = failover_s
        self.clock = clock
        self.sleep = sleep  # a test's clock: waits on ``clock`` while rival claims are watched
        self.partition = ranges_partition(application, stream)
        self.mine: RangeClaim | None = None

    @classmethod
    def of(cls, config: ConsumerConfig, stream: str) -> RangeClaims:
        """The claims of ``stream`` in a consumer's lease table."""
        return cls(DynamoDBClient(config.settings), config.lease_table_name, config.application_name,  # type: ignore[arg-type]
                   stream, config.lease_timing.failover_s)

    def _in_place(self) -> BotocoreDynamoDB:
        return BotocoreDynamoDB(self.dynamodb)

    # -- reading --------------------------------------------------------------------------

    def read(self) -> tuple[int, list[RangeClaim]]:
        """The registration version and every claim (live or not), in claim order."""
        version, _, claims = self.read_all()
        return version, claims

    def read_all(self) -> tuple[int, UnitMap, list[RangeClaim]]:
        """The registration version, the unit map and every claim (live or not), in claim order."""
        return run_sync(self.aread_all(self._in_place()))

    async def aread_all(self, dynamodb: AsyncDynamoDB) -> tuple[int, UnitMap, list[RangeClaim]]:
        return _registry_of(await dynamodb.query(self.table_name, HASH_KEY, self.partition))

    # -- this worker's claim ----------------------------------------------------------------

    def claim(self, worker_id: str, key_range: KeyRange) -> RangeClaim:
        return run_sync(self.aclaim(self._in_place(), worker_id, key_range))

    async def aclaim(self, dynamodb: AsyncDynamoDB, worker_id: str, key_range: KeyRange) -> RangeClaim:
        """Claim ``key_range``; KeyRangeInUseError naming the first live overlapping claim of another range."""
        for _ in range(MAX_ROUNDS):
            version, units, claims = await self.aread_all(dynamodb)
            rivals = [c for c in claims if c.worker_id != worker_id and c.key_range != key_range
                      and c.key_range.overlaps(key_range)]
            if rivals:
                await self._refuse_live(dynamodb, rivals, key_range)  # raises, or deleted them as dead: read again
                continue
            mine = RangeClaim(worker_id, key_range, uuid.uuid4().hex[:12], 0, version + 1)
            put = {"Put": {"TableName": self.table_name, "Item": self._item(mine, dynamodb)}}
            if await self.arecord_units(dynamodb, version, units.with_claim(key_range, worker_id), put):
                self.mine = mine
                log.info("%s on stream %r (application %r)", mine.describe(), self.stream, self.application)
                return mine
        raise KinesisSourceError(
            f"could not register key range {key_range} on stream {self.stream!r}: the claims kept changing "
            f"for {MAX_ROUNDS} rounds; retry"
        )

    async def arecord_units(self, dynamodb: AsyncDynamoDB, version: int, units: UnitMap,
                            *more: Mapping[str, Any]) -> bool:
        """Store ``units`` with ``version + 1`` (and ``more`` actions with it) if the version is still
        ``version``: a claim's registration, or a split finished."""
        bump = unit_registry.version_update(self.table_name, self._version_key(), version, units)
        return (await dynamodb.transact_write(self.table_name, [bump, *more])).committed

    async def _refuse_live(self, dynamodb: AsyncDynamoDB, rivals: list[RangeClaim], key_range: KeyRange) -> None:
        """Watched from the reading that found them: the heartbeats dead ones are deleted by are those judged."""
        async def heartbeats() -> dict[str, tuple[str, int]]:
            return {c.worker_id: c.beat for c in (await self.aread_all(dynamodb))[2]}

        live = await observe_live({c.worker_id: c for c in rivals}, heartbeats, self.failover_s, self.clock,
                                  sleep=self.sleep, found={c.worker_id: c.beat for c in rivals})
        if live:
            first = min(live, key=lambda c: c.order)
            raise KeyRangeInUseError(
                f"key_range {key_range} overlaps a live claim on stream {self.stream!r} (application "
                f"{self.application!r}): {first.describe()}. Give each worker a range that overlaps no other "
                "worker's (e.g. KeyRange.slice(i, n) with the same n), or the very same range to share it."
            )
        for dead in rivals:
            if await self.adelete_dead(dynamodb, dead):
                log.warning("removed the claim of a dead worker: %s (no heartbeat for %.1fs)",
                            dead.describe(), self.failover_s)

    def renew(self) -> bool:
        return run_sync(self.arenew(self._in_place()))

    async def arenew(self, dynamodb: AsyncDynamoDB) -> bool:
        """One heartbeat; False once the claim is gone (judged dead and deleted, or replaced)."""
        mine = self.mine
        if mine is None:
            return False
        return (await dynamodb.update_item(
            self.table_name, self._claim_key(mine.worker_id), "SET #ttl = :ttl ADD #hb :one", "#session = :session",
            names={"#ttl": TTL, "#hb": HEARTBEAT, "#session": SESSION},
            values={":ttl": {"N": str(self._ttl_s(dynamodb))}, ":one": {"N": "1"}, ":session": {"S": mine.session}})).ok

    def release(self) -> None:
        run_sync(self.arelease(self._in_place()))

    async def arelease(self, dynamodb: AsyncDynamoDB) -> None:
        if self.mine is not None:
            await dynamodb.delete_item(**self._deletion(self.mine))
            self.mine = None

    def delete_dead(self, claim: RangeClaim) -> bool:
        return run_sync(self.adelete_dead(self._in_place(), claim))

    async def adelete_dead(self, dynamodb: AsyncDynamoDB, claim: RangeClaim) -> bool:
        """Delete a claim judged dead, unless its heartbeat moved since it was read."""
        return (await dynamodb.delete_item(**self._deletion(claim))).ok

    # -- items ---------------------------------------------------------------------------------

    def _deletion(self, claim: RangeClaim) -> dict[str, Any]:
        """Delete a claim: our own by session; another's only if its heartbeat is still the one observed."""
        condition, names_, values = "#session = :session", {"#session": SESSION}, {":session": {"S": claim.session}}
        if claim is not self.mine:
            condition += " AND #hb = :hb"
            names_["#hb"] = HEARTBEAT
            values[":hb"] = {"N": str(claim.heartbeat)}
        return {"table": self.table_name, "key": self._claim_key(claim.worker_id), "condition": condition,
                "names": names_, "values": values}

    def _claim_key(self, worker_id: str) -> Item:
        return range_claim_key(self.application, self.stream, worker_id)

    def _version_key(self) -> Item:
        return range_version_key(self.application, self.stream)

    def _item(self, claim: RangeClaim, writer: AsyncDynamoDB) -> Item:
        return range_claim_item(self.application, self.stream, claim.worker_id, claim.key_range.start,
                                claim.key_range.end, claim.session, claim.heartbeat, claim.order,
                                self._ttl_s(writer))

    def _ttl_s(self, writer: AsyncDynamoDB) -> int:
        """Garbage collection of dead workers' claims, on the writing client's clock of DynamoDB."""
        return ttl_after(writer.server_time_s(), time.time(), CLAIM_TTL_S)


def _registry_of(items: list[Item]) -> tuple[int, UnitMap, list[RangeClaim]]:
    """The registration version, the unit map and every claim in the items of the claims' partition."""
    version, units, claims = 0, UnitMap(), []
    for item in items:
        sort_key = item[RANGE_KEY]["S"]
        if sort_key == VERSION_KEY:
            version, units = int(item[VERSION]["N"]), unit_registry.decode(item)
        elif sort_key.startswith(CLAIM_PREFIX):
            claims.append(_claim_of(item))
    return version, units, sorted(claims, key=lambda c: c.order)


def _claim_of(item: Item) -> RangeClaim:
    worker_id, start, end, session, heartbeat, order = range_claim_fields(item)
    return RangeClaim(worker_id, KeyRange(start, end), session, heartbeat, order)


def live_and_dead(judge: ExpiryJudge, claims: list[RangeClaim]) -> tuple[list[RangeClaim], list[RangeClaim]]:
    """(live, dead) by the one judge, keyed by worker: a claim seen for the first time (or back after it
    was gone from a reading) is live; one unchanged for the failover time on the judge's clock is dead."""
    verdicts = judge.observe_all({c.worker_id: c.beat for c in claims})
    return ([c for c in claims if not verdicts[c.worker_id].expired],
            [c for c in claims if verdicts[c.worker_id].expired])


async def observe_live(
    candidates: Mapping[K, RangeClaim] | Mapping[K, object],
    heartbeats: Callable[[], Awaitable[Mapping[K, tuple[str, int]]]],
    failover_s: float,
    clock: Callable[[], float] = since_boot,
    poll_s: float = 0.2,
    beat: Callable[[], Awaitable[object]] | None = None,
    sleep: Callable[[float], object] | None = None,
    found: Mapping[K, tuple[str, int]] | None = None,
) -> list:
    """The candidates whose (session, heartbeat) moves before the one judge (:class:`ExpiryJudge`)
    finds every one unchanged for ``failover_s``, returned at the first move; [] once it does.
    An item that disappears is not alive; one that comes back is seen afresh. ``beat`` runs at
    every poll; ``found`` is the reading to watch from (None: one of its own); ``sleep`` waits
    on ``clock`` (a test's)."""
    judge = ExpiryJudge(failover_s, clock)

    def look(now: Mapping[K, tuple[str, int]]) -> Watch[K]:
        return judge.watch({k: now[k] for k in candidates if k in now})

    watch = look(await heartbeats() if found is None else found)
    while not watch.expired:
        await pause(min(poll_s, watch.wait_s), sleep)
        if beat is not None:
            await beat()
        watch = look(await heartbeats())
        if watch.moved:
            return [candidates[k] for k in watch.moved]
    return []
