"""What a consumer checks and keeps up about sticky key ranges, per stream (see :mod:`.range_claims`).

* A worker **with** a ``key_range`` claims it on every stream before its
  leases start (an overlapping live claim of another range fails the start,
  naming it), then refuses to start next to live workers without a range;
  it renews its claims while it runs and releases them on close. A claim
  found gone at renewal (this worker was judged dead) fails the consumer.
* A worker **without** one checks, once its own heartbeat is written, that
  no live claim exists; if one does it fails the start.

Checking in that order (claim, then look for heartbeats; heartbeat, then
look for claims) means two workers of the two kinds starting at the same
moment cannot both miss each other (at worst both refuse to start).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..aws import DynamoDBClient
from ..errors import KeyRangeClaimLostError, KeyRangeInUseError, KinesisSourceError
from ..leases.table import LeaseTable
from .range_claims import RangeClaims, live_unsticky_workers

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger(__name__)


class KeyRangeGuard:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.claims: dict[str, RangeClaims] = {}
        self._beaten_at = 0.0

    def _claims_of(self, stream: str) -> RangeClaims:
        c = self.consumer
        return RangeClaims(DynamoDBClient(c.settings), c.table_name, c.application, stream, c.timing.failover_s)

    # -- on worker threads, during start() and close() -------------------------------------------

    def before_start(self) -> None:
        """Sticky: claim the range on every stream, then make sure no live worker without a range reads it."""
        c = self.consumer
        if c.key_range is None:
            return
        for stream in c.streams:
            claims = self._claims_of(stream)
            claims.claim(c.worker_id, c.key_range)
            self.claims[stream] = claims
        self._beaten_at = time.monotonic()
        for stream in c.streams:
            ordinary = LeaseTable(DynamoDBClient(c.settings), c.table_name, c.application, stream)
            heartbeats = lambda t=ordinary: {w.worker_id: (w.session, w.heartbeat) for w in t.list_workers().values()}
            live = live_unsticky_workers(heartbeats, c.timing.failover_s, beat=self._beat_if_due)
            if live:
                raise KeyRangeInUseError(
                    f"key_range {c.key_range}: stream {stream!r} of application {c.application!r} is read by "
                    f"live worker(s) without a key range ({', '.join(map(repr, live))}), which deliver every "
                    "key. Workers with and without key_range cannot share an application yet: give every "
                    "worker of the application a key range, or none."
                )

    def after_start(self) -> None:
        """Without a range: no live claim may exist on any stream (this worker reads every key)."""
        c = self.consumer
        if c.key_range is not None:
            return
        for stream in c.streams:
            live = self._claims_of(stream).live_claims()
            if live:
                raise KeyRangeInUseError(
                    f"stream {stream!r} of application {c.application!r} has live sticky key-range claims "
                    f"({live[0].describe()}, ...), and this worker has no key_range, so it would deliver "
                    "their keys a second time. Workers with and without key_range cannot share an "
                    "application yet: give every worker of the application a key range, or none."
                )

    def release(self) -> None:
        for stream, claims in list(self.claims.items()):
            try:
                claims.release()
            except KinesisSourceError as exc:
                log.warning("consumer %s: could not remove its key-range claim on %r (%s); it expires",
                            self.consumer.worker_id, stream, exc)
        self.claims.clear()

    def _beat_if_due(self) -> None:
        if time.monotonic() - self._beaten_at >= self.consumer.timing.renew_s:
            self._beaten_at = time.monotonic()
            for claims in self.claims.values():
                claims.renew()

    # -- on the loop, from housekeeping ------------------------------------------------------------

    async def renew(self) -> None:
        for stream, claims in list(self.claims.items()):
            try:
                kept = await asyncio.to_thread(claims.renew)
            except KinesisSourceError as exc:  # transient: the next renewal retries; expiry takes the failover time
                log.warning("consumer %s: key-range claim renewal on %r failed: %s", self.consumer.worker_id, stream, exc)
                continue
            if not kept:
                self.claims.pop(stream, None)
                self.consumer.fail(KeyRangeClaimLostError(
                    f"worker {self.consumer.worker_id}'s claim of key range {self.consumer.key_range} on stream "
                    f"{stream!r} was removed: its renewals stopped for the failover time "
                    f"({self.consumer.timing.failover_s:.1f}s), so another worker judged it dead. Another worker "
                    "may read these keys now; restart this worker."
                ))
