"""kinesis-src's Consumer as a peer worker: every batch to the delivery log, then checkpointed.

Run with the project's .venv (kinesis-src is installed editable there).
Settings: records per fetch, the pause between calls (also when caught up)
and the failover time from the shared command line (common_args.py); the
rest are the Consumer's defaults, which include pacing reads to Kinesis'
2 MB/s per shard. ``PEERS_NO_BYTE_PACING=1`` lifts that one limit (the
speed workload's extra row, to show what it costs on the replay endpoint).
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
    from kinesis_src.consumer import Consumer
    from kinesis_src.leases.timing import LeaseTiming
    from kinesis_src.retrieval.pacing import FetchPacing

    sink = Sink(args.sink, args.worker)
    idle_s = args.idle_ms / 1000
    pacing = FetchPacing(idle_interval_s=idle_s)
    if os.environ.get("PEERS_NO_BYTE_PACING"):  # the speed workload's extra row: no 2 MB/s/shard read pacing
        pacing = FetchPacing(idle_interval_s=idle_s, min_interval_s=idle_s, bytes_per_second=1e12)
    consumer = Consumer(
        args.stream,
        application_name=args.app,
        region=REGION,
        endpoint_url=args.kinesis,
        dynamodb_endpoint_url=args.dynamodb,
        worker_id=args.worker,
        initial_position="trim_horizon",
        lease_timing=LeaseTiming(failover_s=args.failover_s),
        max_records_per_fetch=args.max_records,
        pacing=pacing,
    )
    announce(args.worker)
    async with consumer:
        async for batch in consumer:
            sink.write_batch(
                batch.shard_id,
                ((r.sequence_number, r.partition_key, r.data) for r in batch.records),
            )
            await batch.checkpoint()


if __name__ == "__main__":
    asyncio.run(run())
