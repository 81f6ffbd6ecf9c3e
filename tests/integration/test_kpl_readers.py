"""KPL de-aggregation as every non-Spark reader delivers it, on kinesis-mock + DynamoDB Local.

The workload (tests/kpl.py) mixes plain records and aggregates of 1 to 10
user records, some with explicit hash keys, through a split and a merge.
"Right" means: exactly once, in per-key order, and every user record at its
own position: the aggregate's shard and sequence number, its index in the
aggregate as sub-sequence number (0 for a plain record), its own partition
key and explicit hash key (None where it has none). A Consumer restart
resumes right after the last acknowledged user record, also inside an
aggregate. A malformed aggregate is one record (sub-sequence 0) with a
warning and a count, or MalformedAggregateError naming shard and sequence
number in strict mode. tests/integration/test_kpl_reads.py has the simpler
one-key-per-aggregate cases.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
import readers  # tests/readers.py
from kpl import (
    KplProducer,
    aggregate,
    check_user_records,
    produce_through_split_and_merge,
    records_of_table,
    truncated,
    with_bad_md5,
)

from kinesis_src import (
    BlockingConsumer,
    Consumer,
    LeaseTiming,
    Record,
    drain_stream,
    read_table,
)
from kinesis_src.aws import KinesisClient
from kinesis_src.errors import MalformedAggregateError

pytestmark = pytest.mark.integration

TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


QUIET_S = 10.0  # no batch for this long: everything that will come has come (the check then says what is wrong)


def consumer_options(application: str, **extra: Any) -> dict[str, Any]:
    return dict(application_name=application, lease_timing=TIMING, idle_interval_s=0.1, handle_signals=False, **extra)


async def deliver(consumer: Consumer, count: int) -> list[Record]:
    """Records of whole batches, each checkpointed, until ``count`` came or nothing came for QUIET_S."""
    return await readers.deliver(consumer, count, QUIET_S)


def deliver_blocking(consumer: BlockingConsumer, count: int) -> list[Record]:
    """:func:`deliver` for the BlockingConsumer: a timer, restarted per batch, stops it when quiet."""
    records: list[Record] = []
    watchdog = threading.Timer(QUIET_S, consumer.stop)
    watchdog.start()
    try:
        for batch in consumer:
            watchdog.cancel()
            records.extend(batch.records)
            batch.checkpoint()
            if len(records) >= count:
                break
            watchdog = threading.Timer(QUIET_S, consumer.stop)
            watchdog.start()
    finally:
        watchdog.cancel()
    return records


def test_read_table_and_drain_stream_put_each_user_record_at_its_position(kinesis: KinesisClient, stream_name: str) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)

    table = read_table(stream_name, kinesis=kinesis)
    check_user_records(records_of_table(table), producer, hash_keys=False)  # the table has no hash-key column

    drained = [r for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0) for r in chunk.records()]
    check_user_records(drained, producer)
    assert any(r.explicit_hash_key is not None for r in drained)
    position = lambda r: (r.shard_id, r.sequence_number, r.sub_sequence_number)
    assert [position(r) for r in drained] == [position(r) for r in records_of_table(table)]  # one lineage order


def test_the_cli_read_command_prints_each_user_record_with_its_sub_sequence_number(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]
) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    producer = KplProducer(kinesis, stream_name, keys=6)
    producer.put_rounds(3)

    read = subprocess.run(
        [sys.executable, "-m", "kinesis_src.cli", "read", stream_name, "--no-progress"],
        env={**os.environ, **emulator_env}, capture_output=True, text=True, timeout=120, check=False,
    )
    assert read.returncode == 0, read.stderr
    lines = [json.loads(line) for line in read.stdout.splitlines()]
    assert len(lines) == producer.total  # one JSON line per user record
    missing = [line for line in lines if "subSequenceNumber" not in line]
    assert not missing, f"{len(missing)} of {len(lines)} lines have no subSequenceNumber, e.g. {missing[0]}"
    records = [
        Record(
            partition_key=line["partitionKey"],
            data=base64.b64decode(line["data"]),
            sequence_number=line["sequenceNumber"],
            sub_sequence_number=line["subSequenceNumber"],
            shard_id=line["shardId"],
            approximate_arrival_timestamp=None,
            explicit_hash_key=line.get("explicitHashKey"),  # present only where the user record has one
        )
        for line in lines
    ]
    check_user_records(records, producer)


@pytest.mark.parametrize("flavour", ["async", "blocking"])
def test_the_consumer_delivers_each_user_record_at_its_position_with_its_hash_key(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str], flavour: str
) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)
    options = consumer_options(f"kpl-all-{flavour}")

    async def run_async() -> tuple[list[Record], Any]:
        async with Consumer(stream_name, **options) as consumer:
            return await deliver(consumer, producer.total), consumer.metrics.snapshot()

    def run_blocking() -> tuple[list[Record], Any]:
        with BlockingConsumer(stream_name, **options) as consumer:
            return deliver_blocking(consumer, producer.total), consumer.metrics.snapshot()

    records, metrics = asyncio.run(run_async()) if flavour == "async" else run_blocking()
    check_user_records(records, producer)
    aggregates = sum(n for kind, n in producer.kinds.items() if kind != "plain")
    assert (metrics.aggregates, metrics.aggregates_malformed) == (aggregates, 0)
    assert metrics.records == producer.total  # user records, not Kinesis records


def test_a_restart_resumes_right_after_the_last_acknowledged_user_record_even_inside_an_aggregate(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str]
) -> None:
    """Four consumers of one application, one after the other. The parent shard holds aggregate A
    (5 user records), plain P, aggregate B (3); it is split, and its child gets aggregate C (2) and
    plain Q. Each consumer acknowledges up to one user record with checkpoint(record) and closes:
    inside A, at A's last record, at B's first; the fourth reads to the end. Each must start
    exactly after what the one before acknowledged (across batches, a closed shard and its child)."""
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    data = [f"k:{n}".encode() for n in range(1, 13)]
    a, p, b, c, q = data[0:5], data[5], data[6:9], data[9:11], data[11]
    for blob in (aggregate([("k", None, d) for d in a]), p, aggregate([("k", None, d) for d in b])):
        kinesis.put_records(stream_name, [("k", blob)])  # one call each: Kinesis order is write order
    kinesis.split_shard(stream_name, "shardId-000000000000", 2**127)
    kinesis.wait_active(stream_name)
    for blob in (aggregate([("k", None, d) for d in c]), q):
        kinesis.put_records(stream_name, [("k", blob)])
    options = consumer_options("kpl-restart-chain")

    async def until_async(target: bytes | None) -> list[Record]:
        """Deliver and acknowledge whole batches until ``target``; acknowledge up to it and close.
        ``target=None``: until every record of the stream was delivered."""
        delivered: list[Record] = []
        async with Consumer(stream_name, **options) as consumer:
            while True:
                try:
                    batch = await asyncio.wait_for(consumer.__anext__(), QUIET_S)
                except TimeoutError:
                    raise AssertionError(f"{target!r} was never delivered; got {[r.data for r in delivered]}") from None
                delivered.extend(batch.records)
                hit = next((r for r in batch.records if r.data == target), None)
                await batch.checkpoint(hit)  # None: the whole batch
                if hit is not None or (target is None and data[-1] in {r.data for r in delivered}):
                    return delivered

    def until_blocking(target: bytes) -> list[Record]:
        delivered: list[Record] = []
        with BlockingConsumer(stream_name, **options) as consumer:
            watchdog = threading.Timer(QUIET_S, consumer.stop)
            watchdog.start()
            try:
                for batch in consumer:
                    delivered.extend(batch.records)
                    hit = next((r for r in batch.records if r.data == target), None)
                    batch.checkpoint(hit)
                    if hit is not None:
                        return delivered
            finally:
                watchdog.cancel()
        raise AssertionError(f"{target!r} was never delivered")

    def subs(records: list[Record]) -> list[tuple[bytes, int]]:
        return [(r.data, r.sub_sequence_number) for r in records]

    first = asyncio.run(until_async(a[1]))  # inside A
    assert subs(first)[:2] == [(a[0], 0), (a[1], 1)]
    second = until_blocking(a[4])  # A's last user record, through BlockingBatch.checkpoint(record)
    assert subs(second)[:3] == [(a[2], 2), (a[3], 3), (a[4], 4)], "did not resume at A's third user record"
    third = asyncio.run(until_async(b[0]))  # B's first user record
    assert subs(third)[:2] == [(p, 0), (b[0], 0)], "did not resume at the plain record after A"
    fourth = asyncio.run(until_async(None))
    assert subs(fourth) == [(b[1], 1), (b[2], 2), (c[0], 0), (c[1], 1), (q, 0)]
    assert {r.shard_id for r in fourth[2:]} == {"shardId-000000000002"}  # 2**127 and up: "k" is there
    # Every user record acknowledged exactly once, and the positions of A and B are theirs.
    assert [r.data for r in first[:2] + second[:3] + third[:2] + fourth] == data
    assert len({r.sequence_number for r in first[:2] + second[:3]}) == 1


# -- malformed aggregates --------------------------------------------------------------------------


def put_with_malformed(kinesis: KinesisClient, stream: str) -> list[tuple[bytes, str, int]]:
    """One shard: a good aggregate (k:1, k:2), one with a bad MD5 (k:3, k:4), one truncated (k:5,
    k:6), then plain k:7. Returns what a lenient reader delivers: (data, sequenceNumber, sub)."""
    kinesis.create_stream(stream, 1)
    kinesis.wait_active(stream)
    good = aggregate([("k", None, b"k:1"), ("k", None, b"k:2")])
    bad_md5 = with_bad_md5(aggregate([("k", None, b"k:3"), ("k", None, b"k:4")]))
    cut = truncated(aggregate([("k", None, b"k:5"), ("k", None, b"k:6")]))
    seqs = [kinesis.put_records(stream, [("k", blob)])[0]["SequenceNumber"] for blob in (good, bad_md5, cut, b"k:7")]
    return [(b"k:1", seqs[0], 0), (b"k:2", seqs[0], 1), (bad_md5, seqs[1], 0), (cut, seqs[2], 0), (b"k:7", seqs[3], 0)]


def warned_about(caplog: pytest.LogCaptureFixture, sequence: str) -> bool:
    return any(
        r.levelno == logging.WARNING and sequence in r.getMessage() and "shardId-000000000000" in r.getMessage()
        for r in caplog.records
    )


def test_read_table_and_drain_stream_pass_malformed_aggregates_through_whole_unless_strict(
    kinesis: KinesisClient, stream_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    expected = put_with_malformed(kinesis, stream_name)
    bad_md5_seq, cut_seq = expected[2][1], expected[3][1]

    with caplog.at_level(logging.WARNING):
        table = read_table(stream_name, kinesis=kinesis)
    assert list(zip(table["data"].to_pylist(), table["sequenceNumber"].to_pylist(),
                    table["subSequenceNumber"].to_pylist())) == expected
    assert warned_about(caplog, bad_md5_seq) and warned_about(caplog, cut_seq)

    drained = [r for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0) for r in chunk.records()]
    assert [(r.data, r.sequence_number, r.sub_sequence_number) for r in drained] == expected
    assert [r.partition_key for r in drained] == ["k"] * 5

    # Strict: the first malformed one (bad MD5) stops the read, named by shard and sequence number.
    with pytest.raises(MalformedAggregateError, match=rf"{bad_md5_seq}.*shardId-000000000000|shardId-000000000000.*{bad_md5_seq}"):
        read_table(stream_name, kinesis=kinesis, strict_aggregation=True)
    with pytest.raises(MalformedAggregateError, match=bad_md5_seq):
        list(drain_stream(kinesis, stream_name, fetch_interval_s=0, strict_aggregation=True))


def test_the_consumer_passes_malformed_aggregates_through_counted_unless_strict(
    kinesis: KinesisClient, stream_name: str, emulator_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    expected = put_with_malformed(kinesis, stream_name)
    bad_md5_seq = expected[2][1]

    async def lenient() -> tuple[list[Record], Any]:
        async with Consumer(stream_name, **consumer_options("kpl-malformed-lenient")) as consumer:
            return await deliver(consumer, len(expected)), consumer.metrics.snapshot()

    with caplog.at_level(logging.WARNING):
        records, metrics = asyncio.run(lenient())
    assert [(r.data, r.sequence_number, r.sub_sequence_number) for r in records] == expected
    assert (metrics.aggregates, metrics.aggregates_malformed) == (1, 2)
    assert warned_about(caplog, bad_md5_seq)

    async def strict() -> list[Record]:
        """Raises MalformedAggregateError from the iteration, or returns what came instead."""
        async with Consumer(stream_name, **consumer_options("kpl-malformed-strict", strict_aggregation=True)) as consumer:
            return await deliver(consumer, len(expected))

    with pytest.raises(MalformedAggregateError, match=rf"{bad_md5_seq}.*shardId-000000000000|shardId-000000000000.*{bad_md5_seq}"):
        asyncio.run(strict())
