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
``b"<key>:<counter>"`` (:mod:`kinesis_src.testing.producer`). Endpoints and dummy
credentials come from the environment: the campaign points them at the fault
proxies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: worker_events

from worker_events import add_lease_timing, emit, lease_timing, report_as

from kinesis_src import Consumer
from kinesis_src.testing import decode


async def run(args: argparse.Namespace) -> int:
    consumer = Consumer(
        args.stream,
        application_name=args.application,
        worker_id=args.worker_id,
        initial_position="trim_horizon",
        lease_timing=lease_timing(args),
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--worker-id", required=True)
    add_lease_timing(parser)
    parser.add_argument("--idle", type=float, default=0.2)
    parser.add_argument("--release-timeout", type=float, default=2.0)
    parser.add_argument("--no-preserve-order", action="store_true")
    args = parser.parse_args()
    report_as(args.worker_id, "FAULT_WORKER_LOG")
    try:
        return asyncio.run(run(args))
    except BaseException as exc:  # noqa: BLE001 - the campaign reports how a worker died
        emit("failed", error=type(exc).__name__, message=str(exc)[:1000], trace=traceback.format_exc()[-3000:])
        return 3


if __name__ == "__main__":
    sys.exit(main())
