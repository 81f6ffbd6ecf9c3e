"""async-kinesis as a peer worker (its Consumer with the DynamoDB checkpointer).

Run with benchmarks/peers/.venv-async-kinesis. Matched settings:
``record_limit`` (records per fetch), ``sleep_time_no_records`` (the pause
when a shard is caught up), ``shard_fetch_rate=5`` (Kinesis' 5 calls/s per
shard, so at most one call per 200 ms), ``session_timeout`` (its failover
time) with ``heartbeat_frequency`` a third of it. ``RawProcessor``: the record bytes as
they are (the default JSON processor would fail on other payloads).
``idle_timeout`` is an hour: its iteration otherwise ends after 2 s
without records. Its iterator yields payloads only (no shard, sequence or
key), and checkpoints a batch implicitly when the next item is asked for,
so every item is written and flushed before the next one is requested.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common_args import REGION, announce, parse  # noqa: E402
from sink import Sink  # noqa: E402


async def run() -> None:
    args = parse(__doc__.splitlines()[0])
    from kinesis import Consumer
    from kinesis.aggregators import SimpleAggregator
    from kinesis.dynamodb import DynamoDBCheckPointer
    from kinesis.processors import Processor

    class RawProcessor(Processor, SimpleAggregator):
        def serialize(self, item):  # noqa: ANN001, ANN201
            return item

        def deserialize(self, data):  # noqa: ANN001, ANN201
            return data

    sink = Sink(args.sink, args.worker)
    failover = max(1, int(args.failover_s))
    checkpointer = DynamoDBCheckPointer(
        name=args.app, id=args.worker, session_timeout=failover, heartbeat_frequency=max(1, failover // 3),
        endpoint_url=args.dynamodb, region_name=REGION, create_table=True,
    )
    consumer = Consumer(
        args.stream, endpoint_url=args.kinesis, region_name=REGION, processor=RawProcessor(),
        checkpointer=checkpointer, iterator_type="TRIM_HORIZON", record_limit=args.max_records,
        shard_fetch_rate=5, sleep_time_no_records=args.idle_ms / 1000, idle_timeout=3600, use_list_shards=True,
    )
    announce(args.worker)
    async with consumer:
        while True:
            async for item in consumer:
                sink.write_batch("?", [("?", None, item)])


if __name__ == "__main__":
    asyncio.run(run())
