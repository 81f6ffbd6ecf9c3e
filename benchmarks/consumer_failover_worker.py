"""One kinesis-src Consumer process for the failover benchmark; prints JSON lines on stdout.

Events::

    {"event": "started", "worker": "a", "pid": 123, "t": ...}
    {"event": "held", "worker": "a", "shards": [...], "t": ...}       whenever the held set changes
    {"event": "batch", "worker": "a", "shard": "...", "n": 12, "t": ...}   every delivered batch

``t`` is ``time.monotonic()`` (CLOCK_MONOTONIC: one clock for every process
on the machine). Every batch is checkpointed. Endpoints come from the
command line; credentials from the environment.

Run: python consumer_failover_worker.py --worker a --stream S --application app \
         --endpoint URL --dynamodb URL [--failover 3 --renew 1 --scan 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinesis_src.consumer import Consumer
from kinesis_src.leases.timing import LeaseTiming


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


async def watch_held(consumer: Consumer, worker: str) -> None:
    last: list[str] | None = None
    while True:
        held = consumer.held_shards()
        if held != last:
            emit("held", worker=worker, shards=held)
            last = held
        await asyncio.sleep(0.05)


async def run(args: argparse.Namespace) -> None:
    timing = LeaseTiming(failover_s=args.failover, renew_interval_s=args.renew, scan_interval_s=args.scan)
    consumer = Consumer(
        args.stream,
        application_name=args.application,
        region="us-east-1",
        endpoint_url=args.endpoint,
        dynamodb_endpoint_url=args.dynamodb,
        worker_id=args.worker,
        lease_timing=timing,
        idle_interval_s=args.idle,
        initial_position="trim_horizon",
        metrics_interval_s=3600,
    )
    async with consumer:
        emit("started", worker=args.worker, pid=__import__("os").getpid())
        watcher = asyncio.create_task(watch_held(consumer, args.worker))
        try:
            async for batch in consumer:
                emit("batch", worker=args.worker, shard=batch.shard_id, n=len(batch))
                await batch.checkpoint()
        finally:
            watcher.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--dynamodb", required=True)
    parser.add_argument("--failover", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=1.0)
    parser.add_argument("--scan", type=float, default=0.25)
    parser.add_argument("--idle", type=float, default=0.1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
