"""KPL aggregates in every non-Spark reader, against kinesis-mock, through a split and a merge
(the workload: tests/kpl_producer.py)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from kpl_producer import KEYS, aggregate, check_exactly_once_in_order, produce_through_split_and_merge

from kinesis_src import Consumer, LeaseTiming, Position, drain_stream, read_table
from kinesis_src.errors import MalformedAggregateError
from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC

pytestmark = pytest.mark.integration

TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


def test_read_table_and_drain_stream_deaggregate_through_a_split_and_a_merge(kinesis, stream_name) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)
    table = read_table(stream_name, kinesis=kinesis)
    rows = list(zip(table["data"].to_pylist(), table["sequenceNumber"].to_pylist(), table["subSequenceNumber"].to_pylist()))
    check_exactly_once_in_order(rows, producer)
    assert set(table["partitionKey"].to_pylist()) == set(KEYS)

    drained = [
        (r.data, r.sequence_number, r.sub_sequence_number)
        for chunk in drain_stream(kinesis, stream_name, fetch_interval_s=0)
        for r in chunk.records()
    ]
    assert drained == rows  # the same lineage order


def test_the_consumer_deaggregates_through_a_split_and_a_merge(kinesis, stream_name, emulator_env) -> None:
    producer = produce_through_split_and_merge(kinesis, stream_name)

    async def scenario() -> list[tuple[bytes, str, int]]:
        rows: list[tuple[bytes, str, int]] = []
        async with Consumer(stream_name, application_name="kpl-consumer", lease_timing=TIMING,
                            idle_interval_s=0.1, handle_signals=False) as consumer:
            while len(rows) < producer.total:
                batch = await asyncio.wait_for(consumer.__anext__(), 30)
                rows.extend((r.data, r.sequence_number, r.sub_sequence_number) for r in batch.records)
                await batch.checkpoint()
            assert consumer.metrics.aggregates > 0 and consumer.metrics.aggregates_malformed == 0
        return rows

    check_exactly_once_in_order(asyncio.run(scenario()), producer)


def test_a_consumer_restart_resumes_after_the_user_record_checkpointed_inside_an_aggregate(
    kinesis, stream_name, emulator_env
) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    datas = [f"k:{i}".encode() for i in range(5)]
    kinesis.put_records(stream_name, [("k", aggregate("k", datas)), ("k", b"k:5")])

    async def first() -> None:
        async with Consumer(stream_name, application_name="kpl-restart", lease_timing=TIMING,
                            idle_interval_s=0.1, handle_signals=False) as consumer:
            batch = await asyncio.wait_for(consumer.__anext__(), 30)
            assert [r.sub_sequence_number for r in batch.records][:5] == [0, 1, 2, 3, 4]
            await batch.checkpoint(batch.records[2])  # inside the aggregate

    async def second() -> list[tuple[bytes, int]]:
        async with Consumer(stream_name, application_name="kpl-restart", lease_timing=TIMING,
                            idle_interval_s=0.1, handle_signals=False) as consumer:
            batch = await asyncio.wait_for(consumer.__anext__(), 30)
            await batch.checkpoint()
            return [(r.data, r.sub_sequence_number) for r in batch.records]

    asyncio.run(first())
    assert asyncio.run(second()) == [(b"k:3", 3), (b"k:4", 4), (b"k:5", 0)]


def test_a_malformed_aggregate_passes_through_whole_unless_strict(kinesis, stream_name) -> None:
    kinesis.create_stream(stream_name, 1)
    kinesis.wait_active(stream_name)
    good = aggregate("k", [b"k:0", b"k:1"])
    body = good[4:-16][:-2]  # truncated protobuf with a matching digest
    bad = AGGREGATE_MAGIC + body + hashlib.md5(body).digest()
    kinesis.put_records(stream_name, [("k", good), ("k", bad), ("k", b"k:2")])
    table = read_table(stream_name, kinesis=kinesis)
    assert table["data"].to_pylist() == [b"k:0", b"k:1", bad, b"k:2"]
    assert table["subSequenceNumber"].to_pylist() == [0, 1, 0, 0]
    bad_sequence = table["sequenceNumber"].to_pylist()[2]
    with pytest.raises(MalformedAggregateError, match=f"{bad_sequence} in shard shardId-000000000000"):
        read_table(stream_name, kinesis=kinesis, strict_aggregation=True)
    with pytest.raises(MalformedAggregateError):
        list(drain_stream(kinesis, stream_name, Position.trim_horizon(), fetch_interval_s=0, strict_aggregation=True))
