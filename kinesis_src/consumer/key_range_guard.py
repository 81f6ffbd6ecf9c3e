"""What a sticky consumer keeps up about its key range, per stream (see :mod:`.range_claims`).

It claims the range on every stream before its leases start, renews the claims while it runs and
releases them on close; a claim found gone at renewal (judged dead) fails the consumer."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

from ..errors import KeyRangeClaimLostError, KinesisSourceError
from .range_claims import RangeClaims

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB
    from .consumer_config import ConsumerConfig

log = logging.getLogger(__name__)


class KeyRangeGuard:
    """A sticky worker's claims, one per stream; ``fail`` ends the consumer when one is found gone."""

    def __init__(self, config: ConsumerConfig, fail: Callable[[BaseException], None],
                 dynamodb: Callable[[], AsyncDynamoDB | None]) -> None:
        self.config = config
        self._fail = fail
        self._dynamodb = dynamodb  # the open async client, from start() to close()
        self.claims: dict[str, RangeClaims] = {}
        self._beaten_at = 0.0

    def _claims_of(self, stream: str) -> RangeClaims:
        return RangeClaims.of(self.config, stream)

    # -- during start() and close() ---------------------------------------------------------------

    async def before_start(self) -> None:
        """Sticky: claim the range on every stream (recording the unit splits it needs)."""
        c = self.config
        if c.key_range is None:
            return
        for stream in c.streams:
            claims = self._claims_of(stream)
            await claims.aclaim(self._dynamodb(), c.worker_id, c.key_range)  # type: ignore[arg-type]
            self.claims[stream] = claims
        self._beaten_at = time.monotonic()

    async def release(self) -> None:
        """close(): remove the claims."""
        for stream, claims in list(self.claims.items()):
            try:
                await claims.arelease(self._dynamodb())
            except KinesisSourceError as exc:
                log.warning("consumer %s: could not remove its key-range claim on %r (%s); it expires",
                            self.config.worker_id, stream, exc)
        self.claims.clear()

    async def beat_if_due(self) -> None:
        """Renew the claims when a renewal is due: long waits at start (splits, hand-overs) call it.

        A claim found gone ends the wait with KeyRangeClaimLostError: workers without a range took
        its units up again, so the hand-over it waits for would never come."""
        c = self.config
        if time.monotonic() - self._beaten_at >= c.lease_timing.renew_s:
            self._beaten_at = time.monotonic()
            for stream, claims in list(self.claims.items()):
                if not await claims.arenew(self._dynamodb()):  # type: ignore[arg-type]
                    self.claims.pop(stream, None)
                    raise KeyRangeClaimLostError(
                        f"worker {c.worker_id}'s claim of key range {c.key_range} on stream {stream!r} was removed "
                        "while the worker was starting (settling its units): its renewals stopped for the failover "
                        f"time ({c.lease_timing.failover_s:.1f}s), so another worker judged it dead, and workers without a "
                        "range may read these keys again. Start this worker again."
                    )

    # -- on the loop, from housekeeping ------------------------------------------------------------

    async def renew(self) -> None:
        for stream, claims in list(self.claims.items()):
            try:
                kept = await claims.arenew(self._dynamodb())
            except KinesisSourceError as exc:  # transient: the next renewal retries; expiry takes the failover time
                log.warning("consumer %s: key-range claim renewal on %r failed: %s", self.config.worker_id, stream, exc)
                continue
            if not kept:
                self.claims.pop(stream, None)
                self._fail(KeyRangeClaimLostError(
                    f"worker {self.config.worker_id}'s claim of key range {self.config.key_range} on stream "
                    f"{stream!r} was removed: its renewals stopped for the failover time "
                    f"({self.config.lease_timing.failover_s:.1f}s), so another worker judged it dead. Another worker "
                    "may read these keys now; restart this worker."
                ))
