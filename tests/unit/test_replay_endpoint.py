"""The benchmark replay endpoint (benchmarks/replay_endpoint.py) read by kinesis-src's real readers, on loopback.

The endpoint exists so benchmarks measure the client, not an emulator; these
tests make sure what it serves is Kinesis as the readers know it: every
record exactly once, parents before children through a split and a merge,
every iterator type, boto3's own parser, aiohttp, and a latency that does not
serialize connections.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import threading
import time
from datetime import UTC, timedelta
from pathlib import Path

import boto3
import botocore.session
import pytest

from kinesis_src import AwsSettings, Position, drain_stream, read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.boundary import millisecond_timestamps
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.errors import (
    InvalidRequestError,
    ShardNotFoundError,
    StreamNotFoundError,
)
from kinesis_src.positions import parse_timestamp
from kinesis_src.retry import RetryPolicy

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_endpoint.py"
_spec = importlib.util.spec_from_file_location("replay_endpoint", _PATH)
replay = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("replay_endpoint", replay)  # dataclasses resolve annotations through sys.modules
_spec.loader.exec_module(replay)

FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)
RECORDS = 1_000
SIZE = 64


@pytest.fixture(scope="module")
def flat():
    with replay.ReplayEndpoint(shards=3, records_per_shard=RECORDS, size=SIZE, mode="thread") as ep:
        yield ep


@pytest.fixture(scope="module")
def split_merge():
    with replay.ReplayEndpoint(shards=3, records_per_shard=RECORDS, size=SIZE, lineage="split_merge", mode="thread") as ep:
        yield ep


@pytest.fixture(params=["flat", "split_merge"])
def endpoint(request):
    return request.getfixturevalue(request.param)


def _client(ep) -> KinesisClient:
    return KinesisClient(AwsSettings(region="us-east-1", endpoint_url=ep.endpoint_url, retry=FAST))


def _boto3(ep):
    """A plain boto3 client, but sending timestamps with milliseconds as ours do (botocore 1.40 would not)."""
    session = boto3.Session(botocore_session=millisecond_timestamps(botocore.session.Session()))
    return session.client("kinesis", region_name="us-east-1", endpoint_url=ep.endpoint_url)


def _expected(ep) -> dict[tuple[str, str], bytes]:
    """(shard id, sequence number) -> data, for every record the endpoint serves."""
    return {
        (s.shard_id, s.sequence_number(k)): ep.stream.data(s, k)
        for s in ep.stream.shards
        for k in range(s.count)
    }


def _assert_parents_first(ep, shard_ids: list[str]) -> None:
    """Every record of a parent comes before the first record of its child."""
    first = {}
    last = {}
    for i, shard in enumerate(shard_ids):
        first.setdefault(shard, i)
        last[shard] = i
    for shard in ep.stream.shards:
        for parent in filter(None, (shard.parent, shard.adjacent_parent)):
            assert last[parent] < first[shard.shard_id], f"{parent} not drained before {shard.shard_id}"


def test_the_plans_lineage_is_a_split_then_a_merge(split_merge) -> None:
    shards = {s.shard_id: s for s in split_merge.stream.shards}
    assert [s for s in shards if shards[s].closed] == ["shardId-000000000000", "shardId-000000000001", "shardId-000000000004"]
    assert {shards["shardId-000000000003"].parent, shards["shardId-000000000004"].parent} == {"shardId-000000000000"}
    merged = shards["shardId-000000000005"]
    assert (merged.parent, merged.adjacent_parent) == ("shardId-000000000004", "shardId-000000000001")
    assert merged.start_hash == shards["shardId-000000000004"].start_hash
    assert merged.end_hash == shards["shardId-000000000001"].end_hash
    for s in shards.values():  # children's records arrive after every parent record, and seqs grow
        for parent in filter(None, (s.parent, s.adjacent_parent)):
            p = shards[parent]
            assert p.arrival_ms(p.count - 1) < s.arrival_ms(0) <= p.closed_ms
            assert int(p.ending_sequence()) < int(s.sequence_number(0))


def test_read_table_returns_every_record_once_parents_first(dummy_credentials, endpoint) -> None:
    table = read_table(endpoint.stream_name, kinesis=_client(endpoint), progress=False)
    shards = table.column("shardId").to_pylist()
    got = list(zip(shards, table.column("sequenceNumber").to_pylist()))
    expected = _expected(endpoint)
    assert len(got) == len(set(got)) == len(expected)
    assert dict(zip(got, table.column("data").to_pylist())) == expected
    _assert_parents_first(endpoint, shards)
    first = endpoint.stream.shards[0]
    row = got.index((first.shard_id, first.sequence_number(0)))
    arrival = table.column("approximateArrivalTimestamp")[row].as_py()
    assert arrival == parse_timestamp(first.arrival_ms(0) / 1000)


def test_drain_stream_page_by_page(dummy_credentials, endpoint) -> None:
    """Small pages: many GetRecords per shard, NextShardIterator chains, ChildShards on a parent's last page."""
    before = endpoint.stats()["calls"].get("GetRecords", 0)
    seen: list[tuple[str, str]] = []
    chunks = drain_stream(_client(endpoint), endpoint.stream_name, chunk_records=400, fetch_interval_s=0)
    for chunk in chunks:
        seen += [(chunk.shard_id, r.sequence_number) for r in chunk.records()]
        if chunk.shard_ended:
            shard = endpoint.stream.shard(chunk.shard_id)
            assert {c.shard_id for c in chunk.child_shards} == {c.shard_id for c in shard.children}
    assert len(seen) == len(set(seen)) == endpoint.stream.records
    _assert_parents_first(endpoint, [s for s, _ in seen])
    assert endpoint.stats()["calls"]["GetRecords"] - before >= endpoint.stream.records / 400


def test_a_timestamp_window_is_exact(dummy_credentials, split_merge) -> None:
    """AT_TIMESTAMP iterators and the FROM_TIMESTAMP shard filter: a window in the middle of the lineage."""
    shards = split_merge.stream.shards
    start = parse_timestamp(shards[0].arrival_ms(RECORDS // 2) / 1000)
    end = start + timedelta(milliseconds=2 * RECORDS)
    table = read_table(split_merge.stream_name, start, end, kinesis=_client(split_merge), progress=False)
    lo, hi = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    expected = {
        (s.shard_id, s.sequence_number(k))
        for s in shards
        for k in range(s.count)
        if lo <= s.arrival_ms(k) < hi
    }
    got = list(zip(table.column("shardId").to_pylist(), table.column("sequenceNumber").to_pylist()))
    assert len(got) == len(set(got)) and set(got) == expected
    assert {s for s, _ in got} == {s.shard_id for s in shards}  # the window spans the split and the merge


def test_every_iterator_type_is_a_lookup(dummy_credentials, split_merge) -> None:
    kinesis = _client(split_merge)
    closed, open_ = split_merge.stream.shards[0], split_merge.stream.shards[2]

    def first(shard, position: Position, limit: int = 5):
        iterator = kinesis.get_shard_iterator(split_merge.stream_name, shard.shard_id, position)
        return kinesis.get_records(iterator, limit, shard.shard_id, split_merge.stream_name)

    assert first(closed, Position.trim_horizon()).sequence_numbers[0] == closed.sequence_number(0)
    assert first(closed, Position.at_sequence(closed.sequence_number(10))).sequence_numbers[0] == closed.sequence_number(10)
    assert first(closed, Position.after_sequence(closed.sequence_number(10))).sequence_numbers[0] == closed.sequence_number(11)
    between = str(int(closed.sequence_number(10)) + 1)  # no record has it: AT and AFTER both start at the next
    assert first(closed, Position.at_sequence(between)).sequence_numbers[0] == closed.sequence_number(11)
    assert first(closed, Position.after_sequence(between)).sequence_numbers[0] == closed.sequence_number(11)
    at = parse_timestamp(closed.arrival_ms(20) / 1000)
    assert first(closed, Position.at_timestamp(at)).sequence_numbers[0] == closed.sequence_number(20)
    page = first(open_, Position.latest())
    assert len(page) == 0 and page.next_iterator and page.millis_behind_latest == 0
    page = first(closed, Position.after_sequence(closed.ending_sequence()))  # a consumer resuming at the end
    assert len(page) == 0 and page.next_iterator is None
    assert {c.shard_id for c in page.child_shards} == {"shardId-000000000003", "shardId-000000000004"}
    page = first(closed, Position.trim_horizon(), limit=RECORDS - 1)
    assert page.next_iterator and page.millis_behind_latest > 0
    last = kinesis.get_records(page.next_iterator, 100, closed.shard_id, split_merge.stream_name)
    assert last.sequence_numbers == [closed.ending_sequence()] and last.next_iterator is None


def test_plain_boto3_loop(dummy_credentials, split_merge) -> None:
    """botocore's own parser on every answer; ListShards pagination through NextToken."""
    client = _boto3(split_merge)
    shards, request = [], {"StreamName": split_merge.stream_name, "MaxResults": 2}
    while True:
        out = client.list_shards(**request)
        shards += out["Shards"]
        if "NextToken" not in out:
            break
        request = {"NextToken": out["NextToken"], "MaxResults": 2}
    assert [s["ShardId"] for s in shards] == [s.shard_id for s in split_merge.stream.shards]
    assert shards[5]["ParentShardId"] == "shardId-000000000004"
    assert shards[5]["AdjacentParentShardId"] == "shardId-000000000001"
    assert "EndingSequenceNumber" in shards[0]["SequenceNumberRange"]
    assert "EndingSequenceNumber" not in shards[2]["SequenceNumberRange"]
    got = {}
    for shard in shards:
        iterator = client.get_shard_iterator(
            StreamName=split_merge.stream_name, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            out = client.get_records(ShardIterator=iterator, Limit=1000)
            for r in out["Records"]:
                assert (shard["ShardId"], r["SequenceNumber"]) not in got
                got[(shard["ShardId"], r["SequenceNumber"])] = r["Data"]
                assert r["ApproximateArrivalTimestamp"].tzinfo is not None and r["PartitionKey"]
            if out.get("ChildShards"):
                assert out.get("NextShardIterator") is None
            iterator = out.get("NextShardIterator") if out["Records"] else None
    assert got == _expected(split_merge)
    summary = client.describe_stream_summary(StreamName=split_merge.stream_name)["StreamDescriptionSummary"]
    assert (summary["StreamStatus"], summary["OpenShardCount"]) == ("ACTIVE", 3)
    assert summary["StreamCreationTimestamp"].astimezone(UTC) < min(
        parse_timestamp(s.arrival_ms(0) / 1000) for s in split_merge.stream.shards
    )


@pytest.mark.parametrize(
    "shard_filter, expected",
    [
        ({"Type": "AT_TRIM_HORIZON"}, [0, 1, 2]),
        ({"Type": "FROM_TRIM_HORIZON"}, [0, 1, 2, 3, 4, 5]),
        ({"Type": "AT_LATEST"}, [2, 3, 5]),
        ({"Type": "AFTER_SHARD_ID", "ShardId": "shardId-000000000003"}, [4, 5]),
    ],
)
def test_list_shards_filters(dummy_credentials, split_merge, shard_filter, expected) -> None:
    out = _boto3(split_merge).list_shards(StreamName=split_merge.stream_name, ShardFilter=shard_filter)
    assert [s["ShardId"] for s in out["Shards"]] == [replay.shard_id(i) for i in expected]


def test_list_shards_timestamp_filters(dummy_credentials, split_merge) -> None:
    """Between the split and the merge: shard 0 is closed, 4 and 1 still open, 5 not yet created."""
    shards = split_merge.stream.shards
    at = parse_timestamp((shards[0].closed_ms + 10) / 1000)
    client = _boto3(split_merge)
    for kind, expected in (("AT_TIMESTAMP", [1, 2, 3, 4]), ("FROM_TIMESTAMP", [1, 2, 3, 4, 5])):
        out = client.list_shards(StreamName=split_merge.stream_name, ShardFilter={"Type": kind, "Timestamp": at})
        assert [s["ShardId"] for s in out["Shards"]] == [replay.shard_id(i) for i in expected], kind


def test_async_client_over_aiohttp(dummy_credentials, flat) -> None:
    """The Consumer's client (aiobotocore on aiohttp) accepts the hand-written HTTP answers."""
    shard = flat.stream.shards[1]

    async def read() -> list[str]:
        settings = AwsSettings(region="us-east-1", endpoint_url=flat.endpoint_url, retry=FAST)
        async with AsyncKinesisClient(settings) as kinesis:
            seqs: list[str] = []
            iterator = await kinesis.get_shard_iterator(flat.stream_name, shard.shard_id, Position.trim_horizon())
            while True:
                page = await kinesis.get_records(iterator, 700, shard.shard_id, flat.stream_name)
                seqs += page.sequence_numbers
                if not len(page):
                    return seqs
                iterator = page.next_iterator

    assert asyncio.run(read()) == [shard.sequence_number(k) for k in range(shard.count)]


def test_errors_are_kinesis_errors(dummy_credentials, flat) -> None:
    kinesis = _client(flat)
    with pytest.raises(StreamNotFoundError):
        kinesis.list_shards("no-such-stream")
    with pytest.raises(ShardNotFoundError):
        kinesis.get_shard_iterator(flat.stream_name, "shardId-000000000099", Position.trim_horizon())
    with pytest.raises(InvalidRequestError):
        kinesis.get_records("not-an-iterator", 10, "shardId-000000000000", flat.stream_name)
    with pytest.raises(InvalidRequestError):
        kinesis.get_shard_iterator(flat.stream_name, "shardId-000000000000", Position.at_sequence("1"))
    with pytest.raises(InvalidRequestError):
        _client(flat).list_shards(flat.stream_name, shard_filter={"Type": "NO_SUCH_FILTER"})


def test_latency_is_per_call_and_does_not_serialize_connections() -> None:
    latency = 0.2
    with replay.ReplayEndpoint(shards=1, records_per_shard=10, size=10, latency_s=latency, mode="thread") as ep:
        clients = [replay.RawClient(ep.endpoint_url) for _ in range(4)]
        request = {"StreamName": ep.stream_name, "ShardId": replay.shard_id(0), "ShardIteratorType": "TRIM_HORIZON"}
        started = time.perf_counter()
        clients[0].call("GetShardIterator", request)
        assert time.perf_counter() - started >= latency
        started = time.perf_counter()
        threads = [threading.Thread(target=c.call, args=("GetShardIterator", request)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        for c in clients:
            c.close()
    assert latency <= elapsed < 2.5 * latency  # four calls at once: one latency, not four


def test_process_mode_serves_from_a_child_process(dummy_credentials) -> None:
    with replay.ReplayEndpoint(shards=2, records_per_shard=100, size=20, lineage="split_merge") as ep:
        table = read_table(ep.stream_name, kinesis=_client(ep), progress=False)
        stats = ep.stats()
        pid = ep.pid
    assert table.num_rows == 5 * 100
    assert pid != os.getpid() and stats["pid"] == pid and stats["records"] >= 500 and stats["cpu_s"] > 0
    with pytest.raises(ProcessLookupError):  # stopped on exit
        os.kill(pid, 0)


def test_the_child_process_exits_when_its_parent_goes_away() -> None:
    """Its stdin is a pipe from the parent: EOF (the parent died) stops it, so no server outlives a benchmark."""
    with replay.ReplayEndpoint(shards=1, records_per_shard=10, size=10) as ep:
        ep._proc.stdin.close()
        assert ep._proc.wait(5) == 0
