"""The keyed-counter workload: records whose counters rise per partition key, and who put them.

Data is ``b"<key>:<n>"``; one record per key per PutRecords call, so a retry never reorders a key.
"""


from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..aws import KinesisClient


def encode(key: str, n: int) -> bytes:
    """The data of the ``n``-th record of partition key ``key``."""
    return f"{key}:{n}".encode()


def decode(data: bytes) -> tuple[str, int]:
    """``(key, n)`` from :func:`encode`'s bytes; ``ValueError`` if they are not keyed-counter data."""
    key, _, n = data.decode().rpartition(":")
    return key, int(n)


@dataclass
class KeyedProducer:
    """Puts rounds of records, one per key, and remembers what Kinesis acknowledged."""

    kinesis: KinesisClient
    stream: str
    keys: int = 50
    counters: dict[str, int] = field(default_factory=dict)
    acknowledged: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def key_names(self) -> list[str]:
        return [f"key-{i:03d}" for i in range(self.keys)]

    def put_round(self) -> None:
        following = {key: self.counters.get(key, 0) + 1 for key in self.key_names()}
        self.kinesis.put_records(self.stream, [(k, encode(k, n)) for k, n in following.items()])  # all or raise
        self.counters.update(following)
        self.acknowledged += len(following)

    def put_rounds(self, rounds: int) -> None:
        for _ in range(rounds):
            self.put_round()

    def run_until_stopped(self, max_rounds: int) -> None:
        """Produce in a background thread while the caller reshards; see :meth:`stop`."""
        for _ in range(max_rounds):
            if self._stop.is_set():
                return
            self.put_round()

    def stop(self) -> None:
        self._stop.set()

    def expected(self) -> set[tuple[str, int]]:
        """Every ``(key, n)`` Kinesis acknowledged."""
        return {(key, n) for key, last in self.counters.items() for n in range(1, last + 1)}


def split_then_merge(kinesis: KinesisClient, stream: str, producer: KeyedProducer, rounds: int) -> None:
    """A 2-shard stream: shard 0 split, its upper child merged with shard 1; ``rounds`` at each."""
    kinesis.create_stream(stream, 2)
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)
    kinesis.split_shard(stream, "shardId-000000000000", 2**126)
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)
    kinesis.merge_shards(stream, "shardId-000000000003", "shardId-000000000001")
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)
