"""The command line every peer's worker takes, so the harness starts them all the same way.

Standard library only (each worker imports it under its own venv). The
matched settings live here with their defaults: records per fetch, the
pause between reads, the failover time; each worker maps them onto its
peer's own option names.
"""

from __future__ import annotations

import argparse
import os
import sys

REGION = "us-east-1"


def parse(description: str) -> argparse.Namespace:
    """Parse the shared worker options; makes the benchmarks/peers directory importable."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--app", required=True, help="application (lease table) name")
    parser.add_argument("--kinesis", required=True, help="Kinesis endpoint URL")
    parser.add_argument("--dynamodb", required=True, help="DynamoDB endpoint URL")
    parser.add_argument("--sink", required=True, help="directory for the delivery log (sink.py)")
    parser.add_argument("--worker", required=True, help="worker id")
    parser.add_argument("--max-records", type=int, default=10000)
    parser.add_argument("--idle-ms", type=int, default=200, help="pause between GetRecords calls")
    parser.add_argument("--failover-s", type=float, default=10.0)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    os.environ.setdefault("AWS_REGION", REGION)
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    return args


def announce(worker: str) -> None:
    """One line on stderr when the worker's peer is built and about to read."""
    sys.stderr.write(f"peer worker {worker} pid {os.getpid()} starting\n")
    sys.stderr.flush()
