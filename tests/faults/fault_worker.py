#!/usr/bin/env python3
"""One consumer worker process of the fault campaign: a :class:`kinesis_src.Consumer` reporting JSON lines.

Every line has ``t`` (``time.monotonic()``, one clock for every process on
Linux) and ``worker``. Events::

    {"event": "started", "pid": 123}
    {"event": "batch", "shard": "...", "holding": 3, "index": 1, "records": [["key-007", 12, "4960..."], ...]}
    {"event": "checkpointed", "shard": "...", "holding": 3, "index": 1}
    {"event": "checkpoint_failed", "shard": "...", "holding": 3, "index": 1, "error": "LeaseLostError", "message": "..."}
    {"event": "stopped", "metrics": {...}}                 (after SIGTERM; exit 0)
    {"event": "failed", "error": "...", "message": "..."}  (the consumer raised; exit 3)

Every batch is checkpointed right after it is reported. Record data must be
``b"<key>:<counter>"`` (:mod:`kinesis_src.workload`). Endpoints and dummy
credentials come from the environment: the campaign points them at the fault
proxies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kinesis_src import Consumer, LeaseTiming  # noqa: E402
from kinesis_src.workload import decode  # noqa: E402

WORKER_ID = "?"


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.monotonic(), "worker": WORKER_ID, **fields}, default=str)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def run(args: argparse.Namespace) -> int:
    consumer = Consumer(
        args.stream,
        application_name=args.application,
        worker_id=args.worker_id,
        initial_position="trim_horizon",
        lease_timing=LeaseTiming(failover_s=args.failover, renew_interval_s=args.renew, scan_interval_s=args.scan),
        idle_interval_s=args.idle,
        release_timeout_s=args.release_timeout,
        preserve_shard_order=not args.no_preserve_order,
    )
    async with consumer:
        emit("started", pid=os.getpid())
        async for batch in consumer:
            records = [[r.partition_key, decode(r.data)[1], r.sequence_number] for r in batch.records]
            emit("batch", shard=batch.shard_id, holding=batch.generation, index=batch.index, records=records)
            try:
                await batch.checkpoint()
            except Exception as exc:  # noqa: BLE001 - reported, the consumer carries on
                emit("checkpoint_failed", shard=batch.shard_id, holding=batch.generation, index=batch.index,
                     error=type(exc).__name__, message=str(exc)[:500])
            else:
                emit("checkpointed", shard=batch.shard_id, holding=batch.generation, index=batch.index)
    metrics = asdict(consumer.metrics.snapshot())
    metrics.pop("shards", None)
    emit("stopped", metrics=metrics)
    return 0


def main() -> int:
    global WORKER_ID
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--failover", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=1.0)
    parser.add_argument("--scan", type=float, default=0.25)
    parser.add_argument("--idle", type=float, default=0.2)
    parser.add_argument("--release-timeout", type=float, default=2.0)
    parser.add_argument("--no-preserve-order", action="store_true")
    args = parser.parse_args()
    WORKER_ID = args.worker_id
    logging.basicConfig(level=os.environ.get("FAULT_WORKER_LOG", "WARNING"), stream=sys.stderr,
                        format=f"{args.worker_id} %(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(run(args))
    except BaseException as exc:  # noqa: BLE001 - the campaign reports how a worker died
        emit("failed", error=type(exc).__name__, message=str(exc)[:1000], trace=traceback.format_exc()[-3000:])
        return 3


if __name__ == "__main__":
    sys.exit(main())
