"""What a test's worker script shares: its JSON-lines events, its lease-timing options, its stderr log.

The worker scripts (tests/integration/consumer_worker.py and
processing_worker.py, tests/faults/fault_worker.py) run as processes that
the tests start and read through tests/worker_process.py. Every event is
one flushed JSON line on stdout with ``t`` (``time.monotonic()``: one clock
for every process on Linux, so a test can order the events of different
workers) and ``worker``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Coroutine
from typing import Any

from kinesis_src import LeaseTiming
from kinesis_src.errors import KinesisSourceError

_worker = "?"


def report_as(worker_id: str, log_level_variable: str) -> None:
    """Name the worker in every event and log line; the log level is that environment variable's (WARNING)."""
    global _worker
    _worker = worker_id
    logging.basicConfig(level=os.environ.get(log_level_variable, "WARNING"), stream=sys.stderr,
                        format=f"{worker_id} %(asctime)s %(levelname)s %(name)s: %(message)s")


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.monotonic(), "worker": _worker, **fields}, default=str)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def add_lease_timing(parser: argparse.ArgumentParser) -> None:
    """``--failover``, ``--renew`` and ``--scan`` in seconds (3, 1 and 0.25: fast enough for a test)."""
    parser.add_argument("--failover", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=1.0)
    parser.add_argument("--scan", type=float, default=0.25)


def lease_timing(args: argparse.Namespace) -> LeaseTiming:
    return LeaseTiming(failover_s=args.failover, renew_interval_s=args.renew, scan_interval_s=args.scan)


def run_worker(main: Coroutine[Any, Any, int], worker_id: str, log_level_variable: str) -> int:
    """Run a worker's ``main`` as ``worker_id`` (:func:`report_as`); its exit code, or 3 after a ``failed``
    event when the library raised (a test reads why a worker stopped from its events, not its stderr)."""
    report_as(worker_id, log_level_variable)
    try:
        return asyncio.run(main)
    except KinesisSourceError as exc:
        emit("failed", error=type(exc).__name__, message=str(exc))
        return 3
