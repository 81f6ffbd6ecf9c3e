"""docs/iam.md's policies, checked: runs with exactly those actions succeed, runs missing one fail naming it.

moto's server (a thread, loopback) enforces IAM for Kinesis and DynamoDB once
``INITIAL_NO_AUTH_ACTION_COUNT`` is reached: set-up runs with auth off, then
an IAM user whose only policy is built from the doc's statements reads. moto
authorizes every request against ``Resource: "*"``, so the statements'
actions are what is checked here (see docs/iam.md, "How this is checked").
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore import xform_name
from moto_iam import (  # tests/moto_iam.py; fixtures via conftest.py
    IAM_DOC,
    MOTO_ONLY,
    grant,
    iam_statements,
)

from kinesis_src import AwsSettings, Consumer, LeaseTiming, read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.errors import AccessDeniedError

AWS_PACKAGE = Path(__file__).resolve().parents[2] / "kinesis_src" / "aws"


def without(actions: list[str], missing: str) -> list[str]:
    assert missing in actions
    return [a for a in actions if a != missing]


# -- bounded reads: kinesis-read ----------------------------------------------------------------------


def two_shards(url: str, records: int = 10) -> None:
    """moto's resharding does not route later records to the children, so these streams stay unsplit."""
    kinesis = boto3.client("kinesis", endpoint_url=url)
    kinesis.create_stream(StreamName="s", ShardCount=2)
    kinesis.put_records(StreamName="s", Records=[{"PartitionKey": f"k{i}", "Data": b"x"} for i in range(records)])


def bounded_read(url: str):
    kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=url))
    return read_table("s", kinesis=kinesis, progress=False)


def test_a_bounded_read_needs_exactly_kinesis_read(iam_moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    two_shards(iam_moto, 20)
    grant(iam_moto, iam_statements()["kinesis-read"], monkeypatch)
    table = bounded_read(iam_moto)
    assert table.num_rows == 20 and len(set(table.column("shardId").to_pylist())) == 2


@pytest.mark.parametrize("missing", ["kinesis:ListShards", "kinesis:GetShardIterator", "kinesis:GetRecords"])
def test_a_bounded_read_missing_an_action_names_it(iam_moto: str, monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    two_shards(iam_moto)
    grant(iam_moto, without(iam_statements()["kinesis-read"], missing), monkeypatch)
    with pytest.raises(AccessDeniedError, match=f"not allowed to call {missing}.*docs/iam.md"):
        bounded_read(iam_moto)


# -- the Consumer: kinesis-read + lease-table -------------------------------------------------------------


async def consume(url: str, records: int) -> int:
    """Read ``records`` records, checkpointing every batch, then stop (releasing the leases)."""
    seen = 0
    timing = LeaseTiming(failover_s=3, renew_interval_s=1, scan_interval_s=0.2)
    async with Consumer("s", application_name="iam", endpoint_url=url, dynamodb_endpoint_url=url, region="us-east-1",
                        idle_interval_s=0.2, handle_signals=False, lease_timing=timing) as consumer:
        async for batch in consumer:
            seen += len(batch.records)
            await batch.checkpoint()
            if seen >= records:
                break
    return seen


def consumer_actions() -> list[str]:
    doc = iam_statements()
    return doc["kinesis-read"] + doc["lease-table"] + MOTO_ONLY


def test_the_consumer_needs_exactly_kinesis_read_and_lease_table(iam_moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    two_shards(iam_moto)
    grant(iam_moto, consumer_actions(), monkeypatch)
    assert asyncio.run(asyncio.wait_for(consume(iam_moto, 10), 60)) == 10


@pytest.mark.parametrize("missing", ["kinesis:GetRecords", "dynamodb:Query", "dynamodb:UpdateItem"])
def test_the_consumer_missing_an_action_fails_naming_it(iam_moto: str, monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    two_shards(iam_moto)
    grant(iam_moto, without(consumer_actions(), missing), monkeypatch)
    with pytest.raises(AccessDeniedError, match=f"not allowed to call {missing}"):
        asyncio.run(asyncio.wait_for(consume(iam_moto, 10), 60))


# -- the doc names every operation the aws/ package can call ----------------------------------------------


def test_every_aws_operation_the_code_can_call_is_on_the_iam_page() -> None:
    session = botocore.session.get_session()
    operations: dict[str, set[str]] = {}  # method name -> the operations it may be (a name can be in two services)
    for service in ("kinesis", "dynamodb", "sts"):
        for op in session.get_service_model(service).operation_names:
            operations.setdefault(xform_name(op), set()).add(op)
    source = "\n".join(p.read_text() for p in AWS_PACKAGE.glob("*.py"))
    called = {op for name in re.findall(r"client\.([a-z_]+)\(", source) for op in operations.get(name, ())}
    assert {"GetRecords", "Query", "SubscribeToShard", "TransactWriteItems"} <= called  # the pattern finds calls
    page = IAM_DOC.read_text()
    undocumented = sorted(op for op in called if not re.search(rf"\b{op}\b", page))
    assert undocumented == [], f"AWS operations called in kinesis_src/aws/ but not on docs/iam.md: {undocumented}"
