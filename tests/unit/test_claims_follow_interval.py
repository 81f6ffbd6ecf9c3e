"""A worker without a key range reads the claims every renewal while any exist, every failover time while none do."""

from __future__ import annotations

import asyncio

from lineage import KeyRange

from kinesis_src.consumer import unit_readers
from kinesis_src.consumer import Consumer, ConsumerConfig
from kinesis_src.consumer.range_claims import RangeClaim
from kinesis_src.consumer.units import FULL, Split, UnitMap
from kinesis_src.leases.timing import LeaseTiming

TIMING = LeaseTiming(failover_s=10)


class Claims:
    """Stands in for RangeClaims: read_all answers what the test sets."""

    def __init__(self) -> None:
        self.claims: list[RangeClaim] = []
        self.units = UnitMap()
        self.reads = 0

    async def aread_all(self, dynamodb: object):  # noqa: ANN201
        self.reads += 1
        return 1, self.units, list(self.claims)

    async def adelete_dead(self, dynamodb: object, claim: RangeClaim) -> bool:
        return True


def free(r: unit_readers.UnitReaders, stream: str) -> object:
    return asyncio.run(r._afree(stream, None))  # type: ignore[arg-type]  # the stand-in needs no client


def readers(streams: list[str]) -> tuple[unit_readers.UnitReaders, dict[str, Claims]]:
    config = ConsumerConfig(streams, application_name="app", lease_timing=TIMING, region="us-east-1")
    out = Consumer(config).units
    claims = {s: Claims() for s in streams}
    out.claims = claims.__getitem__  # type: ignore[method-assign]
    return out, claims


def test_before_any_read_and_with_a_claim_the_claims_are_read_every_renewal() -> None:
    r, claims = readers(["a", "b"])
    assert r.follow_interval_s() == TIMING.renew_s
    claims["b"].claims = [RangeClaim("w9", KeyRange(0, 2**127), "s1", 1, 0)]
    free(r, "a")
    free(r, "b")
    assert r.follow_interval_s() == TIMING.renew_s


def test_with_no_claim_and_no_split_anywhere_they_are_read_every_failover_time() -> None:
    r, _ = readers(["a", "b"])
    free(r, "a")
    assert r.follow_interval_s() == TIMING.renew_s  # b not read yet
    free(r, "b")
    assert r.follow_interval_s() == TIMING.failover_s


def test_a_split_under_way_keeps_the_renewal_pace() -> None:
    r, claims = readers(["a"])
    halves = (KeyRange(FULL.start, 2**127 - 1), KeyRange(2**127, FULL.end))
    claims["a"].units = UnitMap(splits=(Split(FULL, halves, "w9"),))
    free(r, "a")
    assert r.follow_interval_s() == TIMING.renew_s
