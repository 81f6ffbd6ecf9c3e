"""A unit's split on DynamoDB Local (kinesis_src/consumer/unit_split.py), without Kinesis.

The unit's leases move to its pieces at their checkpoints, one transaction
per shard: a shard mid-stream, one at SHARD_END, one held by a worker that
died (taken after the failover time, never before). Splitting again is a
no-op, and a piece lease that exists already is kept as it is.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest

from kinesis_src.aws.botocore_dynamodb import BotocoreDynamoDB
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.range_claims import RangeClaims
from kinesis_src.consumer.unit_split import split_unit
from kinesis_src.consumer.units import FULL, Split, UnitMap, scope_of
from kinesis_src.in_place import run_sync
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from lineage import HashRange, KeyRange

pytestmark = pytest.mark.integration

APP, TABLE, FAILOVER = "mixed-split", "kinesis-src-mixed-split", 1.5
SEQ = "4959" + "1" * 52


def split_in_place(dynamodb: DynamoDBClient, stream: str, split: Split, worker_id: str,
                   beat: Callable[[], object] | None = None) -> int:
    """``split_unit`` run in place by a synchronous caller, its beat awaited."""
    async def abeat() -> None:
        if beat is not None:
            beat()

    claims = RangeClaims(dynamodb, TABLE, APP, stream, FAILOVER)
    return run_sync(split_unit(BotocoreDynamoDB(dynamodb), claims, split, worker_id, abeat))


def shard(n: int) -> str:
    return f"shardId-{n:012d}"


def test_a_split_moves_each_shard_checkpoint_to_the_pieces_once(emulator_env) -> None:
    dynamodb = DynamoDBClient(AwsSettings.from_env())
    stream = f"split-{uuid.uuid4().hex[:6]}"
    unit = LeaseTable(dynamodb, TABLE, APP, stream)
    unit.ensure_table(create=True)
    whole = HashRange(FULL.start, FULL.end)
    checkpoints = {0: Checkpoint.sequence(SEQ, 3), 1: Checkpoint.shard_end(), 2: Checkpoint.trim_horizon()}
    for n, checkpoint in checkpoints.items():
        assert unit.create_lease(Lease(shard(n), checkpoint, whole, parent_shard_ids=(shard(9),) if n else ()))
    ghost = unit.register_worker("ghost")  # dies now: never renews
    held = unit.take_lease(unit.get_lease(shard(2)), "ghost")
    assert held is not None and held.owner == "ghost"
    lower, upper = KeyRange.slice(0, 2), KeyRange.slice(1, 2)
    kept = Lease(shard(2), Checkpoint.sequence("7" * 20), whole)
    LeaseTable(dynamodb, TABLE, APP, stream, scope=str(upper)).create_lease(kept)  # from a sticky-only era

    split = UnitMap().with_claim(lower, "claimer").splits[0]
    assert split.pieces == (lower, upper)
    began = time.monotonic()
    assert split_in_place(dynamodb, stream, split, "claimer") == 3
    assert time.monotonic() - began >= FAILOVER * 0.9  # the ghost's lease waited for its failover
    assert ghost.worker_id in unit.list_workers()  # a dead heartbeat is left to expire; never deleted here

    assert unit.list_leases() == []
    for piece in split.pieces:
        leases = {lease.shard_id: lease for lease in LeaseTable(dynamodb, TABLE, APP, stream, scope=scope_of(piece)).list_leases()}
        assert set(leases) == {shard(0), shard(1), shard(2)}
        for n, checkpoint in checkpoints.items():
            lease = leases[shard(n)]
            if piece == upper and n == 2:
                assert lease.checkpoint == kept.checkpoint  # an existing piece lease is kept
                continue
            assert (lease.checkpoint, lease.owner, lease.counter) == (checkpoint, None, 0)
            assert lease.parent_shard_ids == ((shard(9),) if n else ())
    assert split_in_place(dynamodb, stream, split, "finisher") == 0  # done: idempotent


def test_a_split_waits_for_a_live_reader_of_the_unit_to_leave(emulator_env) -> None:
    dynamodb = DynamoDBClient(AwsSettings.from_env())
    stream = f"split-{uuid.uuid4().hex[:6]}"
    unit = LeaseTable(dynamodb, TABLE, APP, stream)
    unit.ensure_table(create=True)
    assert unit.create_lease(Lease(shard(0), Checkpoint.trim_horizon(), HashRange(FULL.start, FULL.end)))
    reader = unit.register_worker("reader")
    taken = unit.take_lease(unit.get_lease(shard(0)), "reader")
    split = UnitMap().with_claim(KeyRange.slice(1, 2), "claimer").splits[0]
    beats = 0

    def beat() -> None:  # the reader heartbeats a few times, then checkpoints, releases and leaves
        nonlocal reader, beats
        beats += 1
        if beats < 15:
            _, reader = unit.heartbeat(reader)
        elif beats == 15:
            lease = unit.checkpoint(taken, Checkpoint.sequence(SEQ))
            unit.release_lease(lease)
            unit.deregister_worker(reader)

    assert split_in_place(dynamodb, stream, split, "claimer", beat) == 1
    assert beats >= 15
    for piece in split.pieces:
        (lease,) = LeaseTable(dynamodb, TABLE, APP, stream, scope=scope_of(piece)).list_leases()
        assert lease.checkpoint == Checkpoint.sequence(SEQ)
