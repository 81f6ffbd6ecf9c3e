"""A keyed-counter workload and its checker: how the demo and the tests prove ordering.

Every record's data is ``b"<key>:<n>"`` where n counts up per partition key.
If a reader delivers each key's records with strictly increasing n, and
every (key, n) that was acknowledged by Kinesis exactly once, then nothing
was lost, duplicated or reordered -- including across splits and merges,
where a key moves from a parent shard to a child.

The producer sends rounds: one record per key per PutRecords call, so a
partially failed call that is retried can never put a key's records out of
order (two records of one key are never in flight together).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from .aws import KinesisClient
from .records import Record
from .table_rows import records_of_table


def encode(key: str, n: int) -> bytes:
    return f"{key}:{n}".encode()


def decode(data: bytes) -> tuple[str, int]:
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
        return {(key, n) for key, last in self.counters.items() for n in range(1, last + 1)}


def split_then_merge(kinesis: KinesisClient, stream: str, producer: KeyedProducer, rounds: int) -> None:
    """A 2-shard stream whose shard 0 is split and whose upper child is merged with shard 1.

    ``rounds`` of records go in before the split, between split and merge,
    and after the merge, so every key has records in a parent and a child.
    """
    kinesis.create_stream(stream, 2)
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)
    kinesis.split_shard(stream, "shardId-000000000000", 2**126)
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)
    kinesis.merge_shards(stream, "shardId-000000000003", "shardId-000000000001")
    kinesis.wait_active(stream)
    producer.put_rounds(rounds)


@dataclass
class OrderReport:
    """What the checker found; ``ok`` only if every count of a problem is zero."""

    records: int
    keys: int
    out_of_order: list[str]
    duplicates: int
    missing: int
    unexpected: int
    shards: Counter

    @property
    def ok(self) -> bool:
        return not (self.out_of_order or self.duplicates or self.missing or self.unexpected)

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        lines = [
            f"per-key order check: {verdict}",
            f"  records read      {self.records}",
            f"  partition keys    {self.keys}",
            f"  out of order      {len(self.out_of_order)}",
            f"  duplicates        {self.duplicates}",
            f"  missing           {self.missing}",
            f"  unexpected        {self.unexpected}",
        ]
        lines += [f"    e.g. {example}" for example in self.out_of_order[:5]]
        return "\n".join(lines)


def check_order(records: Iterable[Record], expected: set[tuple[str, int]]) -> OrderReport:
    """Check delivery order and completeness of keyed-counter records."""
    last: dict[str, tuple[int, str]] = {}
    seen: Counter = Counter()
    positions: Counter = Counter()
    shards: Counter = Counter()
    out_of_order: list[str] = []
    count = 0
    for record in records:
        count += 1
        key, n = decode(record.data)
        seen[(key, n)] += 1
        positions[(record.shard_id, record.sequence_number)] += 1
        shards[record.shard_id] += 1
        previous = last.get(key)
        if previous is not None and n <= previous[0]:
            out_of_order.append(f"{key}: {n} (in {record.shard_id}) after {previous[0]} (in {previous[1]})")
        last[key] = (n, record.shard_id)
    duplicates = sum(c - 1 for c in seen.values() if c > 1) + sum(c - 1 for c in positions.values() if c > 1)
    return OrderReport(
        records=count,
        keys=len(last),
        out_of_order=out_of_order,
        duplicates=duplicates,
        missing=len(expected - seen.keys()),
        unexpected=len(seen.keys() - expected),
        shards=shards,
    )


def read_file_sink(path: str) -> list[list[Record]]:
    """Records a Spark file sink committed, one list per micro-batch in batch order.

    Uses the sink's own log (``_spark_metadata``), which is what makes the
    file sink exactly-once: files of a batch that was never committed are
    ignored, as any Spark reader of the directory would. Needs the log not
    compacted (``spark.sql.streaming.fileSink.log.compactInterval`` larger
    than the number of batches) to keep batch boundaries.
    """
    import json
    import os

    import pyarrow.parquet as pq

    log_dir = os.path.join(path, "_spark_metadata")
    batches = sorted(int(n) for n in os.listdir(log_dir) if n.isdigit())
    out: list[list[Record]] = []
    for batch in batches:
        with open(os.path.join(log_dir, str(batch))) as handle:
            lines = handle.read().splitlines()[1:]  # first line is the log version
        records: list[Record] = []
        for entry in map(json.loads, lines):
            if entry.get("action") != "add":
                continue
            table = pq.read_table(entry["path"].removeprefix("file://"))
            records.extend(records_of_table(table))
        out.append(records)
    return out
