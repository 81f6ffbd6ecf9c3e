"""A Consumer on a stream deleted and created again under the same name refuses the old leases (issue #9, item 9).

The old leases name shard ids and sequence numbers the new stream reuses or
never issued; the consumer must fail at start, naming the stream and how to
start over, instead of reading with them.
"""

from __future__ import annotations

import asyncio

import pytest
import waiting  # tests/waiting.py

from kinesis_src import Consumer, LeaseTiming
from kinesis_src.aws import KinesisClient
from kinesis_src.errors import StreamNotFoundError, StreamRecreatedError

pytestmark = pytest.mark.integration

TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


def consumer(stream: str) -> Consumer:
    return Consumer(stream, application_name="identity-tests", initial_position="trim_horizon",
                    lease_timing=TIMING, handle_signals=False)


async def read_one(stream: str) -> int:
    async with consumer(stream) as c:
        async for batch in c:
            await batch.checkpoint()
            return len(batch)
    return 0


def gone(kinesis: KinesisClient, stream: str) -> bool:
    try:
        kinesis.describe_stream(stream)
    except StreamNotFoundError:
        return True
    return False


def test_a_recreated_stream_is_refused_with_how_to_start_over(kinesis: KinesisClient, stream_name: str) -> None:
    kinesis.create_stream(stream_name, 1)
    first = kinesis.wait_active(stream_name)
    kinesis.put_records(stream_name, [("k", b"old")])
    assert asyncio.run(read_one(stream_name)) == 1

    kinesis.delete_stream(stream_name)
    waiting.wait_for(lambda: gone(kinesis, stream_name), 60, "the stream to be deleted")
    waiting.wait_for(lambda: _recreated(kinesis, stream_name, first.created), 60, "a later creation time")
    kinesis.wait_active(stream_name)

    with pytest.raises(StreamRecreatedError) as info:  # before the fix: reads the old leases, never returns
        asyncio.run(asyncio.wait_for(read_one(stream_name), 60))
    message = str(info.value)
    assert "deleted and created again" in message and stream_name in message
    assert "new application_name" in message


def _recreated(kinesis: KinesisClient, stream: str, before) -> bool:
    """Create the stream again; creation times have second precision, so retry until it differs."""
    try:
        summary = kinesis.describe_stream(stream)
    except StreamNotFoundError:
        kinesis.create_stream(stream, 1)
        summary = kinesis.wait_active(stream)
    if abs((summary.created - before).total_seconds()) >= 1.0:
        return True
    kinesis.delete_stream(stream)
    waiting.wait_for(lambda: gone(kinesis, stream), 60, "the stream to be deleted")
    return False
