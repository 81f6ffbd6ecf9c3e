"""Test helper: KPL-aggregated and plain records of ``key:counter`` through a split and a merge.

A key's user records are written in counter order, aggregated (KPL format,
by aws_kinesis_agg, the reference aggregator) or plain, so a reader is
right when every key comes out as 0, 1, 2, ... exactly once.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_src import KinesisClient

KEYS = [f"key-{i}" for i in range(8)]
PER_AGGREGATE = 3


def aggregate(key: str, datas: Iterable[bytes]) -> bytes:
    agg = RecordAggregator()
    for data in datas:
        agg.add_user_record(key, data)
    record = agg.clear_and_get()
    assert record is not None
    return record.get_contents()[2]


class Producer:
    """Per key, alternately one aggregate of PER_AGGREGATE user records and one plain record."""

    def __init__(self, kinesis: KinesisClient, stream: str) -> None:
        self.kinesis, self.stream = kinesis, stream
        self.counters = {k: 0 for k in KEYS}
        self.rounds = 0

    def put_round(self) -> None:
        entries = []
        for key in KEYS:
            if self.rounds % 2 == 0:
                datas = [self._next(key) for _ in range(PER_AGGREGATE)]
                entries.append((key, aggregate(key, datas)))
            else:
                entries.append((key, self._next(key)))
        self.kinesis.put_records(self.stream, entries)
        self.rounds += 1

    def _next(self, key: str) -> bytes:
        value = f"{key}:{self.counters[key]}".encode()
        self.counters[key] += 1
        return value

    @property
    def total(self) -> int:
        return sum(self.counters.values())


def produce_through_split_and_merge(kinesis: KinesisClient, stream: str) -> Producer:
    kinesis.create_stream(stream, 2)
    kinesis.wait_active(stream)
    producer = Producer(kinesis, stream)
    for _ in range(4):
        producer.put_round()
    shard0 = kinesis.list_shards(stream)[0]["HashKeyRange"]
    lo, hi = int(shard0["StartingHashKey"]), int(shard0["EndingHashKey"])
    kinesis.split_shard(stream, "shardId-000000000000", (lo + hi + 1) // 2)
    kinesis.wait_active(stream)
    for _ in range(4):
        producer.put_round()
    kinesis.merge_shards(stream, "shardId-000000000003", "shardId-000000000001")
    kinesis.wait_active(stream)
    for _ in range(4):
        producer.put_round()
    return producer


def check_exactly_once_in_order(rows: list[tuple[bytes, str, int]], producer: Producer) -> None:
    """rows: (data, sequenceNumber, subSequenceNumber) in delivery order."""
    seen: dict[str, list[int]] = defaultdict(list)
    for data, _seq, _sub in rows:
        key, counter = data.decode().rsplit(":", 1)
        seen[key].append(int(counter))
    assert {k: v for k, v in seen.items()} == {k: list(range(n)) for k, n in producer.counters.items()}
    positions = [(seq, sub) for _, seq, sub in rows]
    assert len(set(positions)) == len(positions) == producer.total
    assert max(sub for _, _, sub in rows) == PER_AGGREGATE - 1
