"""The fake's data: shards, records, streams, faults, calls, and how positions and filters select them."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kinesis_src.aws.fanout import ConsumerDescription
from kinesis_src.positions import Position
from kinesis_src.records import ChildShard

MAX_HASH_KEY = 2**128 - 1
START = 1_700_000_000.0  # the default clock (epoch seconds): 2023-11-14
SEQUENCE_BASE = 49_590_000_000_000_000_000_000
ACCOUNT_ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/"


def shard_id(number: int) -> str:
    return f"shardId-{number:012d}"


def utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


class Gate:
    """Holds the calls it is injected into until :meth:`open`; sync calls block, async ones await."""

    def __init__(self) -> None:
        self._opened = threading.Event()

    def open(self) -> None:
        self._opened.set()

    def wait(self, timeout_s: float = 10.0) -> None:
        assert self._opened.wait(timeout_s), "the test never opened the gate"

    async def wait_async(self) -> None:
        while not self._opened.is_set():
            await asyncio.sleep(0.001)


@dataclass
class Fault:
    method: str
    action: BaseException | Gate
    shard_id: str | None = None
    calls: frozenset[int] | None = None  # 1-based call numbers (per shard if shard_id); None: the next call


@dataclass(frozen=True)
class Call:
    method: str
    stream: str | None = None
    shard_id: str | None = None
    position: Position | None = None
    args: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class FakeRecord:
    sequence_number: str
    partition_key: str
    data: bytes
    arrival: float


@dataclass
class FakeShard:
    shard_id: str
    start: int
    end: int
    parents: tuple[str, ...] = ()
    starting_sequence: str = "0"
    ending_sequence: str | None = None
    created: float = START
    closed_at: float | None = None
    records: list[FakeRecord] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)  # int(sequence_number) per record, for bisect
    page_sizes: list[int] = field(default_factory=list)  # each next page/event: at most this many records
    end_page_apart: bool = False  # the end (ChildShards) comes on an empty page after the last records
    lag_ms: int | None = None  # MillisBehindLatest to report instead of the computed one

    @property
    def closed(self) -> bool:
        return self.ending_sequence is not None

    def listing(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ShardId": self.shard_id}
        if self.parents:
            out["ParentShardId"] = self.parents[0]
        if len(self.parents) > 1:
            out["AdjacentParentShardId"] = self.parents[1]
        out["HashKeyRange"] = {"StartingHashKey": str(self.start), "EndingHashKey": str(self.end)}
        out["SequenceNumberRange"] = {"StartingSequenceNumber": self.starting_sequence}
        if self.ending_sequence is not None:
            out["SequenceNumberRange"]["EndingSequenceNumber"] = self.ending_sequence
        return out

    @classmethod
    def from_listing(cls, raw: dict[str, Any], now: float) -> FakeShard:
        parents = tuple(raw[k] for k in ("ParentShardId", "AdjacentParentShardId") if raw.get(k))
        seqs, hashes = raw["SequenceNumberRange"], raw["HashKeyRange"]
        ending = seqs.get("EndingSequenceNumber")
        return cls(raw["ShardId"], int(hashes["StartingHashKey"]), int(hashes["EndingHashKey"]), parents,
                   seqs["StartingSequenceNumber"], ending, now, now if ending else None)


@dataclass
class FakeStream:
    name: str
    arn: str
    created: datetime
    retention_hours: int = 24
    status: str = "ACTIVE"
    shards: dict[str, FakeShard] = field(default_factory=dict)
    consumers: dict[str, ConsumerDescription] = field(default_factory=dict)
    last_number: int = -1  # shard numbers are never reused, not even after a trim

    def shard(self, sid: str) -> FakeShard:
        return self.shards[sid]

    def open_shards(self) -> list[FakeShard]:
        return [s for s in self.shards.values() if not s.closed]

    def next_id(self) -> str:
        self.last_number = max([self.last_number, *(int(s.rsplit("-", 1)[1]) for s in self.shards)]) + 1
        return shard_id(self.last_number)

    def children(self, sid: str) -> tuple[ChildShard, ...]:
        return tuple(ChildShard(c.shard_id, c.parents, c.start, c.end) for c in self.shards.values() if sid in c.parents)



def reads_after(shard: FakeShard, position: Position) -> int:
    """The sequence number an iterator at ``position`` reads after (-1: from the oldest record)."""
    args = position.iterator_args()
    kind = args["ShardIteratorType"]
    if kind == "AT_SEQUENCE_NUMBER":
        return int(args["StartingSequenceNumber"]) - 1
    if kind == "AFTER_SEQUENCE_NUMBER":
        return int(args["StartingSequenceNumber"])
    if kind == "LATEST":
        return shard.keys[-1] if shard.keys else int(shard.starting_sequence) - 1
    if kind == "AT_TIMESTAMP":
        when = args["Timestamp"].timestamp()
        before = [k for k, r in zip(shard.keys, shard.records) if r.arrival < when]
        return before[-1] if before else -1
    return -1  # TRIM_HORIZON


def passes_filter(shard: FakeShard, shard_filter: dict[str, Any]) -> bool:
    """ListShards' ShardFilter on the shard's open/close times (AT_* : open then; FROM_*: open then or later)."""
    kind = shard_filter["Type"]
    if kind == "AT_LATEST":
        return not shard.closed
    if kind == "AFTER_SHARD_ID":
        return shard.shard_id > shard_filter["ShardId"]
    if kind in ("AT_TIMESTAMP", "FROM_TIMESTAMP"):
        ts = shard_filter["Timestamp"]
        when = ts.timestamp() if isinstance(ts, datetime) else float(ts)
        still_open = shard.closed_at is None or shard.closed_at >= when
        return still_open and (kind == "FROM_TIMESTAMP" or shard.created <= when)
    return True  # AT_TRIM_HORIZON / FROM_TRIM_HORIZON: every shard still listed
