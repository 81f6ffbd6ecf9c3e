#!/usr/bin/env python3
"""A consumer worker process for the multi-process consumer tests.

Runs one :class:`~kinesis_src.Consumer` (asyncio) and reports everything it
does as JSON lines on stdout, one flushed line per event. Every event has
``t``: ``time.monotonic()`` in this process, which on Linux is the same
clock in every process of the machine, so the test can order events of
different workers. Endpoints and credentials come from the environment
(``launcher.Emulators.env()``).

Events (stdout)::

    {"event": "started", "worker": "w1", "pid": 123}
    {"event": "batch", "worker": "w1", "shard": "...", "holding": 3, "index": 1, "ends_shard": false,
     "records": [["key-007", 12, "4960..."], ...], "stream": "s"}   (partition key, counter from the data, sequence)
    {"event": "checkpointed", "worker": "w1", "shard": "...", "holding": 3, "index": 1, "sequence": "4960...",
     "ends_shard": false}                                     (sequence: null for the empty batch ending a shard)
    {"event": "checkpoint_failed", "worker": "w1", "shard": "...", "holding": 3, "error": "LeaseLostError", ...}
    {"event": "skipped_checkpoint", "worker": "w1", "shard": "...", "holding": 3, "index": 2}
    {"event": "held", "worker": "w1", "shards": [...]}       (on every change, and every --held-interval s)
    {"event": "fan_out", "worker": "w1", "readers": {"s@START-END": ["name", "arn"], ...}}
                                      (--consumer-mode efo: each reader's stream consumer, on every change)
    {"event": "stopped", "worker": "w1", "metrics": {...}}   (then exit 0)
    {"event": "failed", "worker": "w1", "error": "...", "message": "..."}   (then exit 3)

``holding`` tells two holdings of one shard by this worker apart (the
consumer's lease generation); the records themselves carry nothing of it.

Checkpoints follow the documented rule: every ``--checkpoint-every``-th
batch of a shard, and always a batch whose ``ends_shard`` is True; never
any batch of a ``--no-checkpoint-shards`` shard.
Record data must be ``b"<key>:<counter>"`` (:mod:`kinesis_src.testing.producer`).

SIGTERM is left to the consumer's own handling: the iteration ends after
the current batch, the leases are released, ``stopped`` is printed and the
process exits 0.

Run: python tests/integration/consumer_worker.py --stream S --application app --worker-id w1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: worker_events

from worker_events import add_lease_timing, emit, lease_timing, run_worker

from kinesis_src import Consumer
from kinesis_src.consumer import Batch
from kinesis_src.errors import KinesisSourceError
from kinesis_src.testing import decode


def batch_records(batch: Batch) -> list[list[Any]]:
    out = []
    for record in batch.records:
        _key, counter = decode(record.data)
        out.append([record.partition_key, counter, record.sequence_number])
    return out


def fan_out_targets(consumer: Consumer) -> dict[str, list[str]]:
    """Each reader's stream consumer (EFO), by reader key: ``[name, arn]``."""
    return {key: [r.fan_out.consumer_name, r.fan_out.consumer_arn]
            for key, r in list(consumer.readers.items()) if r.fan_out is not None}


async def report_held(consumer: Consumer, poll_s: float, every_s: float) -> None:
    """``held`` when the set of held shards changes (polled every ``poll_s``), and every ``every_s``;
    ``fan_out`` when the readers' stream consumers change."""
    last: list[str] | None = None
    last_targets: dict[str, list[str]] = {}
    next_periodic = time.monotonic()
    while True:
        held = consumer.held_shards()
        now = time.monotonic()
        if held != last or now >= next_periodic:
            emit("held", shards=held, changed=held != last)
            last, next_periodic = held, now + every_s
        if (targets := fan_out_targets(consumer)) != last_targets:
            emit("fan_out", readers=targets)
            last_targets = targets
        await asyncio.sleep(poll_s)


async def run(args: argparse.Namespace) -> int:
    timing = lease_timing(args)
    no_checkpoint = {s for s in (args.no_checkpoint_shards or "").split(",") if s}
    unacknowledged: dict[str, int] = {}  # per shard: batches delivered since its last checkpoint
    streams = args.stream.split(",")
    consumer = Consumer(
        streams[0] if len(streams) == 1 else streams,
        application_name=args.application,
        key_range=args.key_range,
        worker_id=args.worker_id,
        initial_position=args.initial_position,
        lease_timing=timing,
        idle_interval_s=args.idle,
        max_records_per_fetch=args.max_records,
        release_timeout_s=args.release_timeout,
        metrics_interval_s=args.metrics_interval,
        consumer_mode=args.consumer_mode,
        **({"consumer_name": args.consumer_name} if args.consumer_name else {}),
    )
    async with consumer:
        emit("started", pid=os.getpid())
        reporter = asyncio.create_task(report_held(consumer, 0.02, args.held_interval))
        try:
            async for batch in consumer:
                shard = batch.shard_id
                emit("batch", shard=shard, holding=batch.generation, index=batch.index, ends_shard=batch.ends_shard,
                     records=batch_records(batch), stream=batch.stream)
                if shard in no_checkpoint:
                    emit("skipped_checkpoint", shard=shard, holding=batch.generation, index=batch.index)
                    continue
                unacknowledged[shard] = unacknowledged.get(shard, 0) + 1
                if unacknowledged[shard] < args.checkpoint_every and not batch.ends_shard:
                    emit("skipped_checkpoint", shard=shard, holding=batch.generation, index=batch.index)
                    continue
                try:
                    await batch.checkpoint()
                except KinesisSourceError as exc:
                    emit("checkpoint_failed", shard=shard, holding=batch.generation, index=batch.index,
                         error=type(exc).__name__, message=str(exc))
                else:
                    emit("checkpointed", shard=shard, holding=batch.generation, index=batch.index,
                         sequence=batch.last_sequence_number, ends_shard=batch.ends_shard)
                unacknowledged[shard] = 0
        finally:
            reporter.cancel()
    metrics = asdict(consumer.metrics.snapshot())
    metrics.pop("shards", None)
    emit("stopped", metrics=metrics, summary=consumer.metrics.summary())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", required=True, help="a stream, or several comma-separated")
    parser.add_argument("--key-range", default=None, help="a sticky key range: 'START-END' or 'i/n'")
    parser.add_argument("--application", required=True)
    parser.add_argument("--worker-id", required=True)
    add_lease_timing(parser)
    parser.add_argument("--checkpoint-every", type=int, default=1,
                        help="checkpoint every Nth batch of a shard (and always one whose ends_shard is True)")
    parser.add_argument("--no-checkpoint-shards", default="", help="comma-separated shard ids never checkpointed")
    parser.add_argument("--initial-position", default="trim_horizon")
    parser.add_argument("--idle", type=float, default=0.2, help="idle_interval_s")
    parser.add_argument("--max-records", type=int, default=10000, help="max_records_per_fetch")
    parser.add_argument("--release-timeout", type=float, default=5.0)
    parser.add_argument("--metrics-interval", type=float, default=60.0)
    parser.add_argument("--held-interval", type=float, default=1.0)
    parser.add_argument("--consumer-mode", default="polling", help="polling or efo (enhanced fan-out)")
    parser.add_argument("--consumer-name", default="", help="EFO: the stream consumer's name (default: the application)")
    args = parser.parse_args(argv)
    if args.checkpoint_every < 1:
        parser.error("--checkpoint-every must be >= 1")
    return run_worker(run(args), args.worker_id, "CONSUMER_WORKER_LOG")


if __name__ == "__main__":
    sys.exit(main())
