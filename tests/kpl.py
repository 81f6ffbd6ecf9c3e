"""Test helper: a deterministic mix of KPL aggregates and plain records, what each user record must
come out as, and malformed aggregates.

The workload is kinesis_src.testing's keyed counters (data ``b"<key>:<n>"``,
n = 1, 2, ... per key), so its order checker proves exactly-once in per-key
order. What this adds is the mix: per round, the keys of each open shard
are cut into groups (1, 2, 3 or 5 keys), and each group goes in as plain
records (one per key), as an aggregate without explicit hash keys, or as an
aggregate whose user records carry explicit hash keys; an aggregate takes
one or two counters per key, so aggregates hold 1 to 10 user records
(:meth:`KplProducer.put_round` with ``closing=True`` ends every open shard with a bigger one).

Routing: the KPL sends an aggregate where its first user record would go
(that record's partition key, or explicit hash key). An aggregate here only
holds keys of one shard, and a user record's explicit hash key is its key's
own hash with the lowest bit flipped (checked to be in the same shard), so
every record of a key, plain or aggregated, goes to the shard that owns the
key's hash: per-key order must survive a split and a merge. Each PutRecords
call holds at most one entry per key, so a retried entry cannot overtake.

For every user record the producer remembers where it must come out
(:class:`Expected`): shard, the aggregate's sequence number, its index in
the aggregate (0 for a plain record), partition key and explicit hash key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import boto3
from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_src import Record
from kinesis_src.aws import KinesisClient
from kinesis_src.table_rows import records_of_table  # noqa: F401  (the tests import it from here)
from kinesis_src.testing import check_order, decode, encode, split_then_merge

KPL_MAGIC = b"\xf3\x89\x9a\xc2"  # the aggregation format's own constant (not the reader's)
GROUP_SIZES = (1, 2, 3, 5)
PLAIN, AGGREGATE, AGGREGATE_WITH_HASH_KEYS = "plain", "aggregate", "aggregate+ehk"


def key_hash(key: str) -> int:
    """Where Kinesis routes a partition key: MD5 as a 128-bit big-endian integer."""
    return int.from_bytes(hashlib.md5(key.encode()).digest(), "big")


def hash_key_of(key: str) -> str:
    """The explicit hash key this workload gives a user record of ``key``: near the key's own hash."""
    return str(key_hash(key) ^ 1)


@dataclass(frozen=True)
class Expected:
    """Where and how one user record must come out of a reader."""

    shard_id: str
    sequence_number: str
    sub_sequence_number: int
    partition_key: str
    explicit_hash_key: str | None
    aggregate_size: int  # user records in its Kinesis record (1 for a plain record)


@dataclass
class KplProducer:
    """Puts rounds of the mix described in the module docstring; ``expected`` maps data to :class:`Expected`."""

    kinesis: KinesisClient
    stream: str
    keys: int = 12
    counters: dict[str, int] = field(default_factory=dict)
    expected: dict[bytes, Expected] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)  # Kinesis records put, by kind
    rounds: int = 0
    _boto: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        settings = self.kinesis.settings
        self._boto = boto3.client("kinesis", region_name=settings.region, endpoint_url=settings.endpoint_url)

    def key_names(self) -> list[str]:
        return [f"key-{i:03d}" for i in range(self.keys)]

    @property
    def total(self) -> int:
        """User records acknowledged by Kinesis."""
        return len(self.expected)

    def expected_pairs(self) -> set[tuple[str, int]]:
        """What kinesis_src.testing.check_order wants: every (key, n) written."""
        return {(key, n) for key, last in self.counters.items() for n in range(1, last + 1)}

    def put_rounds(self, rounds: int) -> None:
        for _ in range(rounds):
            self.put_round()

    def put_round(self, *, closing: bool = False) -> None:
        """One round of the mix; ``closing``: instead, one aggregate per open shard with two user
        records of each of its keys, with hash keys, so every shard's last record is an aggregate."""
        shards = self._open_shards()
        by_shard: dict[str, list[str]] = {shard_id: [] for shard_id in shards}
        for key in self.key_names():
            by_shard[self._shard_of(key_hash(key), shards)].append(key)
        entries: list[tuple[dict[str, Any], str, list[tuple[str, str | None, bytes]], str]] = []
        turn = self.rounds
        for shard_id, keys in sorted(by_shard.items()):
            while keys:
                size = len(keys) if closing else GROUP_SIZES[turn % len(GROUP_SIZES)]
                group, keys = keys[:size], keys[size:]
                kind = AGGREGATE_WITH_HASH_KEYS if closing else (PLAIN, AGGREGATE, AGGREGATE_WITH_HASH_KEYS)[turn % 3]
                per_key = 2 if closing else 1 + turn % 2
                turn += 1
                if kind == PLAIN:
                    for key in group:
                        data = self._next(key)
                        entries.append(({"PartitionKey": key, "Data": data}, shard_id, [(key, None, data)], kind))
                    continue
                users = []
                for key in group:
                    hash_key = None
                    if kind == AGGREGATE_WITH_HASH_KEYS:
                        hash_key = hash_key_of(key)
                        assert self._shard_of(int(hash_key), shards) == shard_id, "hash key left its key's shard"
                    users.extend((key, hash_key, self._next(key)) for _ in range(per_key))
                entry = aggregate_entry(users)
                entries.append((entry, shard_id, users, kind))
        results = self._put([e for e, _, _, _ in entries])
        for (_, shard_id, users, kind), result in zip(entries, results):
            assert result["ShardId"] == shard_id, f"{kind} routed to {result['ShardId']}, not {shard_id}"
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            for sub, (key, hash_key, data) in enumerate(users):
                self.expected[data] = Expected(
                    shard_id, result["SequenceNumber"], sub, key, hash_key, 1 if kind == PLAIN else len(users)
                )
        self.rounds += 1

    def _next(self, key: str) -> bytes:
        self.counters[key] = self.counters.get(key, 0) + 1
        return encode(key, self.counters[key])

    def _open_shards(self) -> dict[str, tuple[int, int]]:
        return {
            s["ShardId"]: (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
            for s in self.kinesis.list_shards(self.stream)
            if "EndingSequenceNumber" not in s["SequenceNumberRange"]
        }

    @staticmethod
    def _shard_of(hash_value: int, shards: dict[str, tuple[int, int]]) -> str:
        return next(shard_id for shard_id, (lo, hi) in shards.items() if lo <= hash_value <= hi)

    def _put(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """PutRecords, resending only failed entries (a key has one entry per call: order holds)."""
        results: list[dict[str, Any] | None] = [None] * len(records)
        pending = list(range(len(records)))
        for attempt in range(10):
            out = self._boto.put_records(StreamName=self.stream, Records=[records[i] for i in pending])
            failed = []
            for i, result in zip(pending, out["Records"]):
                if result.get("ErrorCode"):
                    failed.append(i)
                else:
                    results[i] = result
            pending = failed
            if not pending:
                return results  # type: ignore[return-value]
            time.sleep(0.05 * 2**attempt)  # backoff between retries of throttled entries, not a wait
        raise AssertionError(f"{len(pending)} entries still rejected after 10 PutRecords calls")


def aggregate_entry(users: list[tuple[str, str | None, bytes]]) -> dict[str, Any]:
    """A PutRecords entry holding ``users`` (partition key, explicit hash key or None, data) as one
    KPL aggregate, routed as the KPL routes it (by its first user record)."""
    agg = RecordAggregator()
    for key, hash_key, data in users:
        assert agg.add_user_record(key, data, hash_key) is None, "aggregate overflowed"
    record = agg.clear_and_get()
    partition_key, hash_key, blob = record.get_contents()
    assert blob[:4] == KPL_MAGIC
    entry = {"PartitionKey": partition_key, "Data": blob}
    if hash_key:
        entry["ExplicitHashKey"] = hash_key
    return entry


def aggregate(users: list[tuple[str, str | None, bytes]]) -> bytes:
    return aggregate_entry(users)["Data"]


# -- malformed aggregates ---------------------------------------------------------------


def with_bad_md5(blob: bytes) -> bytes:
    """The aggregate with one byte of its MD5 digest flipped: the protobuf still parses."""
    assert blob[:4] == KPL_MAGIC
    return blob[:-1] + bytes([blob[-1] ^ 0xFF])


def truncated(blob: bytes, cut: int = 3) -> bytes:
    """The aggregate's protobuf cut short by ``cut`` bytes, with a digest that matches the cut body:
    only parsing can tell it is broken."""
    assert blob[:4] == KPL_MAGIC
    body = blob[4:-16][:-cut]
    return KPL_MAGIC + body + hashlib.md5(body).digest()


# -- checking what a reader delivered ------------------------------------------------------------


def check_user_records(records: Iterable[Record], producer: KplProducer, *, hash_keys: bool = True) -> None:
    """Exactly once, per-key order, and each user record at its own position with its own key.

    ``records`` in delivery order. ``hash_keys=False`` for readers whose rows
    carry no explicit hash key (read_table, Spark): it is not compared.
    """
    records = list(records)
    whole = [r.data for r in records if r.data[:4] == KPL_MAGIC]
    assert not whole, (
        f"{len(whole)} KPL aggregates delivered whole, not as their user records: {len(records)} records "
        f"delivered for {producer.total} user records written; e.g. {whole[0][:24]!r}"
    )
    # check_order counts a repeated (shard, sequence number) as a duplicate: make the
    # position (sequenceNumber, subSequenceNumber) the unit it sees.
    unique = [dataclasses.replace(r, sequence_number=f"{r.sequence_number}/{r.sub_sequence_number}") for r in records]
    report = check_order(unique, producer.expected_pairs())
    assert report.ok, report.summary()
    assert len(records) == producer.total, f"{len(records)} user records delivered, {producer.total} written"
    wrong = []
    for r in records:
        want = producer.expected[r.data]
        got = Expected(
            r.shard_id, r.sequence_number, r.sub_sequence_number, r.partition_key,
            r.explicit_hash_key if hash_keys else want.explicit_hash_key, want.aggregate_size,
        )
        if got != want:
            wrong.append(f"{r.data!r}: got {got}, want {want}")
    assert not wrong, f"{len(wrong)} user records not at their position, e.g.\n  " + "\n  ".join(wrong[:5])


def records_of_rows(rows: Iterable[Any]) -> list[Record]:
    """Spark Rows (the source's columns) as Records, in row order."""
    return [
        Record(
            partition_key=row.partitionKey,
            data=bytes(row.data),
            sequence_number=row.sequenceNumber,
            sub_sequence_number=row.subSequenceNumber,
            shard_id=row.shardId,
            approximate_arrival_timestamp=row.approximateArrivalTimestamp,
        )
        for row in rows
    ]


def produce_through_split_and_merge(kinesis: KinesisClient, stream: str, rounds: int = 3) -> KplProducer:
    """A 2-shard stream, shard 0 split, its upper child merged with shard 1 (workload.split_then_merge),
    ``rounds`` rounds of the mix before, between and after."""
    producer = KplProducer(kinesis, stream)
    split_then_merge(kinesis, stream, producer, rounds)
    assert set(producer.kinds) == {PLAIN, AGGREGATE, AGGREGATE_WITH_HASH_KEYS}, producer.kinds
    moved = {decode(d)[0] for d, e in producer.expected.items() if e.shard_id not in ("shardId-000000000000", "shardId-000000000001")}
    assert moved, "no key reached a child shard: the order check would prove nothing about resharding"
    return producer
