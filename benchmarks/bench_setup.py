"""What the Consumer benchmarks (bench_consumer.py, bench_efo.py) share: the preloaded stream and the reader.

Each measures a :class:`kinesis_src.Consumer` that a subprocess of the
benchmark runs against the emulators it started; the stream is filled
before, and the Consumer is set up the same way in each so that their
numbers compare: from TRIM_HORIZON, no metrics log inside the measured
window, no signal handlers of its own (the parent kills the subprocess).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

REGION = "us-east-1"


def preload(kinesis: Any, stream: str, shards: int, per_shard: int, size: int) -> int:
    """Create ``stream`` and put ``shards`` x ``per_shard`` records of ``size`` random bytes; their count."""
    kinesis.create_stream(stream, shards)
    kinesis.wait_active(stream)
    payload = os.urandom(size)
    total = shards * per_shard
    for start in range(0, total, 500):
        kinesis.put_records(stream, [(f"key-{i}", payload) for i in range(start, min(total, start + 500))])
    return total


def bench_consumer(args: argparse.Namespace, application_name: str, **settings: Any) -> Any:
    """The Consumer of ``args.stream`` on ``args.endpoint`` / ``args.dynamodb`` a benchmark reader measures;
    ``settings`` on top (consumer mode, idle interval)."""
    from kinesis_src import Consumer

    return Consumer(
        args.stream,
        application_name=application_name,
        region=REGION,
        endpoint_url=args.endpoint,
        dynamodb_endpoint_url=args.dynamodb,
        initial_position="trim_horizon",
        metrics_interval_s=3600,
        handle_signals=False,
        **settings,
    )
