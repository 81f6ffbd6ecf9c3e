"""Kinesis and the lease table behind one LocalStack endpoint (host mode, no Docker, offline).

LocalStack's own DynamoDB runs here when ``LocalStack(dynamodb=True)`` places
a Java and npm's DynamoDB Local jar where LocalStack looks for them (see
docs/localstack.md). The Consumer is given the LocalStack endpoint only:
DynamoDB defaults to the Kinesis endpoint, so its lease table must be
LocalStack's. Through a split and a merge (tests/kpl.py), every user record
is delivered once, in per-key order; the checkpoints in LocalStack's
DynamoDB are where the records stopped, and a second Consumer of the same
application resumes from them and delivers only what was written since.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import launcher  # localstack/ is on sys.path (tests/conftest.py)
import pytest
from kpl import KplProducer, check_user_records, produce_through_split_and_merge
from readers import deliver  # tests/readers.py

from kinesis_src import Consumer, LeaseTiming, Record
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.leases.table import LeaseTable
from kinesis_src.names import default_table_name
from kinesis_src.testing import LOADED_RETRY, IdempotentKinesisClient, emulator_settings

pytestmark = pytest.mark.integration

APP = "single-endpoint"
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


@pytest.fixture(scope="module")
def localstack_with_dynamodb() -> Iterator[str]:
    """LocalStack serving Kinesis and its own DynamoDB on one loopback port; yields that endpoint."""
    if os.environ.get(launcher.ENV_ISOLATED) != "1":
        pytest.skip("run under `python localstack/launcher.py isolated -- pytest` (what `make test` does)")
    import localstack_host

    if not localstack_host.is_installed():
        pytest.skip("LocalStack is not installed (needs Python 3.13): run `make setup`")
    with localstack_host.LocalStack(dynamodb=True, startup_timeout=240.0) as running:  # a loaded machine
        yield running.endpoint


@pytest.fixture
def endpoint(localstack_with_dynamodb: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Dummy credentials, and no endpoint from the environment: only the one passed."""
    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "KINESIS_SRC_ENDPOINT_URL", "KINESIS_SRC_DYNAMODB_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    return localstack_with_dynamodb


def consume(stream: str, endpoint: str, count: int) -> list[Record]:
    async def run() -> list[Record]:
        async with Consumer(
            stream, application_name=APP, endpoint_url=endpoint, lease_timing=TIMING,
            handle_signals=False, idle_interval_s=0.2, retry=LOADED_RETRY,
        ) as worker:
            return await deliver(worker, count)

    return asyncio.run(run())


def checkpoint_problems(kinesis: KinesisClient, table: LeaseTable, stream: str, records: list[Record]) -> list[str]:
    """A closed shard not at SHARD_END (a deleted lease counts as drained); an open shard whose
    checkpoint is not its last delivered user record."""
    last: dict[str, tuple[int, int]] = {}
    for r in records:
        last[r.shard_id] = max(last.get(r.shard_id, (0, -1)), (int(r.sequence_number), r.sub_sequence_number))
    leases = {lease.shard_id: lease for lease in table.list_leases()}
    problems = []
    for shard in kinesis.list_shards(stream):
        shard_id = shard["ShardId"]
        closed = "EndingSequenceNumber" in shard["SequenceNumberRange"]
        lease = leases.get(shard_id)
        if closed:
            if lease is not None and not lease.is_shard_end:
                problems.append(f"{shard_id}: closed, lease at {lease.checkpoint}, not SHARD_END")
            continue
        if lease is None:
            problems.append(f"{shard_id}: open shard without a lease")
            continue
        at = lease.checkpoint
        got = None if at.sequence_number is None else (int(at.sequence_number), at.sub_sequence_number)
        if got != last.get(shard_id):
            problems.append(f"{shard_id}: open, lease at {at}, last delivered record {last.get(shard_id)}")
    return problems


def test_a_consumer_with_kinesis_and_its_lease_table_on_one_localstack_endpoint(
    endpoint: str, stream_name: str
) -> None:
    kinesis = IdempotentKinesisClient(emulator_settings("us-east-1", endpoint))
    producer: KplProducer = produce_through_split_and_merge(kinesis, stream_name)

    first = consume(stream_name, endpoint, producer.total)
    check_user_records(first, producer)

    # The lease table is LocalStack's (no other DynamoDB was given), checkpointed where delivery stopped.
    dynamodb = DynamoDBClient(emulator_settings("us-east-1", endpoint))
    table = LeaseTable(dynamodb, default_table_name(APP), APP, stream_name)
    assert table.list_leases(), "no leases in LocalStack's DynamoDB"
    assert checkpoint_problems(kinesis, table, stream_name, first) == []

    # A second Consumer of the same application resumes from those checkpoints: only the new round.
    before = producer.total
    producer.put_round()
    assert producer.total > before
    second = consume(stream_name, endpoint, producer.total - len(first))
    assert len(second) == producer.total - before, f"{len(second)} delivered after the restart, {producer.total - before} new"
    check_user_records(first + second, producer)
