"""The one held set: the coordinator's leases and the reader's holdings, in one place."""

from __future__ import annotations

import pytest

from kinesis_src.leases.held_leases import HeldLeases
from kinesis_src.leases.model import Checkpoint, Lease
from lineage import HashRange

SHARD = "shardId-000000000001"


def lease(counter: int = 1) -> Lease:
    return Lease(SHARD, Checkpoint.trim_horizon(), HashRange(0, 10), counter=counter, owner="me")


def test_a_holding_whose_write_is_in_flight_outlives_the_lease_let_go_until_the_reader_retires_it() -> None:
    held: HeldLeases[str] = HeldLeases()
    held.hold(lease(), 1.0)
    held.attach(SHARD, "ending")
    assert held.let_go(SHARD) == lease()
    assert held.leases() == {} and held.lease(SHARD) is None  # the coordinator holds nothing
    assert held.holding(SHARD) == "ending" and held.holdings() == ["ending"]  # the reader's write goes on
    assert held.detach(SHARD, "ending")
    assert held.holding(SHARD) is None and held.holdings() == []


def test_a_holding_retired_while_the_lease_is_held_leaves_the_lease_held() -> None:
    held: HeldLeases[str] = HeldLeases()
    held.hold(lease(), 1.0)
    held.attach(SHARD, "released")
    assert held.detach(SHARD, "released")
    assert held.leases() == {SHARD: lease()}  # the coordinator's release lets it go next
    assert held.let_go(SHARD) == lease() and held.leases() == {}


def test_let_go_at_another_counter_changes_nothing() -> None:
    held: HeldLeases[str] = HeldLeases()
    held.hold(lease(2), 1.0)
    assert held.let_go(SHARD, counter=1) is None
    assert held.lease(SHARD) == lease(2)
    assert held.let_go(SHARD, counter=2) == lease(2)


def test_a_re_take_keeps_the_earlier_holding_for_the_reader_to_retire_and_a_stale_detach_is_ignored() -> None:
    held: HeldLeases[str] = HeldLeases()
    held.hold(lease(1), 1.0)
    held.attach(SHARD, "first")
    held.let_go(SHARD)
    held.hold(lease(2), 2.0)
    assert held.holding(SHARD) == "first"  # the reader sees it on the take, and loses it
    held.attach(SHARD, "second")
    assert not held.detach(SHARD, "first")  # the first holding's write answered late
    assert held.holding(SHARD) == "second" and held.acquired_at(SHARD) == 2.0


def test_a_checkpoint_updates_the_lease_only_at_the_counter_still_held() -> None:
    held: HeldLeases[str] = HeldLeases()
    held.hold(lease(2), 1.0)
    written = Lease(SHARD, Checkpoint.sequence("5"), HashRange(0, 10), counter=1, owner="me")
    held.update(written, same_counter=True)
    assert held.lease(SHARD) == lease(2)
    written = Lease(SHARD, Checkpoint.sequence("5"), HashRange(0, 10), counter=2, owner="me")
    held.update(written, same_counter=True)
    assert held.lease(SHARD) == written


def test_nothing_can_be_attached_to_a_shard_not_held() -> None:
    held: HeldLeases[str] = HeldLeases()
    with pytest.raises(RuntimeError, match=SHARD):
        held.attach(SHARD, "orphan")
