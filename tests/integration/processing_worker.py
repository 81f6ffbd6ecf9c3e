#!/usr/bin/env python3
"""A worker process for the parallel-processing tests: one Consumer, records processed with ``process()``.

Every handler call is reported as one flushed JSON line on stdout, with
``t`` = ``time.monotonic()`` (one clock for every process on Linux, so the
test can order calls of different workers)::

    {"event": "started", "worker": "w1", "pid": 123}
    {"event": "call", "worker": "w1", "t": ..., "key": "key-007", "n": 12, "shard": "...",
     "seq": "4960...", "count": 1}                 (at the start of each handler call)
    {"event": "stopped", "worker": "w1", "metrics": {...}}   (then exit 0)
    {"event": "failed", "worker": "w1", "error": "...", "message": "..."}   (then exit 3)

Records of a ``--poison-keys`` key whose counter n is a multiple of
``--poison-every`` always fail (the handler raises RuntimeError): they are
dead-lettered after ``--max-attempts`` deliveries. Every other record is accepted after
sleeping ``--sleep-ms``. Data must be ``b"<key>:<n>"`` (kinesis_src.testing.producer).
SIGTERM: the consumer stops, in-flight calls drain, leases are released.

Run: python tests/integration/processing_worker.py --stream S --application app --worker-id w1 --dlq S-dlq
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: worker_events

from worker_events import add_lease_timing, emit, lease_timing, run_worker

from kinesis_src import Consumer
from kinesis_src.consumer.processing import Backoff, DeliveredRecord
from kinesis_src.testing import decode


async def run(args: argparse.Namespace) -> int:
    timing = lease_timing(args)
    consumer = Consumer(
        args.stream, application_name=args.application, worker_id=args.worker_id,
        initial_position="trim_horizon", lease_timing=timing, idle_interval_s=0.1, release_timeout_s=2.0,
    )

    poison_keys = {k for k in args.poison_keys.split(",") if k}

    async def handler(record: DeliveredRecord) -> None:
        key, n = decode(record.data)
        emit("call", key=key, n=n, shard=record.shard_id, seq=record.sequence_number, count=record.delivery_count)
        if key in poison_keys and n % args.poison_every == 0:
            raise RuntimeError(f"poison record {key}:{n}")
        await asyncio.sleep(args.sleep_ms / 1000)

    async with consumer:
        emit("started", pid=os.getpid())
        metrics = await consumer.process(
            handler, ordering=args.ordering, max_in_flight=args.max_in_flight,
            max_delivery_attempts=args.max_attempts, dead_letter=args.dlq or None,
            retry_backoff=Backoff(initial_s=0.02, max_s=0.1), checkpoint_interval_s=args.checkpoint_interval,
            drain_timeout_s=2.0,
        )
    emit("stopped", metrics=asdict(metrics))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--ordering", default="key")
    parser.add_argument("--max-in-flight", type=int, default=16)
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--dlq", default="")
    parser.add_argument("--poison-keys", default="", help="comma-separated partition keys with poison records")
    parser.add_argument("--poison-every", type=int, default=4)
    parser.add_argument("--sleep-ms", type=float, default=5.0)
    parser.add_argument("--checkpoint-interval", type=float, default=0.2)
    add_lease_timing(parser)
    args = parser.parse_args(argv)
    return run_worker(run(args), args.worker_id, "PROCESSING_WORKER_LOG")


if __name__ == "__main__":
    sys.exit(main())
