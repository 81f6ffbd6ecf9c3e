#!/usr/bin/env python3
"""A lease worker process for the race, failover and fencing tests.

Runs a :class:`~kinesis_src.leases.LeaseCoordinator` (with shard sync) and
speaks JSON lines: events on stdout, commands on stdin. Endpoints and
credentials come from the environment (``launcher.Emulators.env()``).

Events (stdout)::

    {"event": "started", "worker": "w1", "pid": 123}
    {"event": "cycle", "worker": "w1", "held": [...], "live": [...], ...}
    {"event": "acquired", "shard": "...", "counter": 3, "checkpoint": "..."}
    {"event": "lost", "shard": "...", "reason": "..."}
    {"event": "read", "shard": "...", "from": "...", "sequence_numbers": [...]}   (--read-on-acquire)
    {"event": "result", "id": 1, "ok": false, "error": "LeaseLostError", "message": "..."}
    {"event": "failed", "error": "CorruptLeaseError", "message": "..."}          (then exit 3)

Commands (stdin)::

    {"id": 1, "cmd": "checkpoint", "shard": "...", "sequence": "..."}        through the coordinator
    {"id": 2, "cmd": "checkpoint_stale", "shard": "...", "sequence": "..."}  with the lease as last held
    {"id": 3, "cmd": "progress_stale", "shard": "...", "run": "r", "batch": 1, "sequence": "..."}
    {"id": 4, "cmd": "stop"}

The ``*_stale`` commands write with the lease value this process last held,
whatever the coordinator believes now: they are the writes a paused worker
had in flight when it resumed, which only the table's fencing can stop.

Run: python tests/integration/lease_worker.py --worker-id w1 --table T --application app --stream S
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kinesis_src.aws.dynamodb import DynamoDBClient  # noqa: E402
from kinesis_src.aws.kinesis import KinesisClient  # noqa: E402
from kinesis_src.config import AwsSettings  # noqa: E402
from kinesis_src.errors import KinesisSourceError  # noqa: E402
from kinesis_src.leases.coordinator import CycleReport, LeaseCoordinator  # noqa: E402
from kinesis_src.leases.model import Checkpoint, Lease  # noqa: E402
from kinesis_src.leases.progress_store import ProgressStore, ShardProgress  # noqa: E402
from kinesis_src.leases.shard_sync import ShardSync  # noqa: E402
from kinesis_src.leases.table import LeaseTable  # noqa: E402
from kinesis_src.leases.timing import LeaseTiming  # noqa: E402
from kinesis_src.positions import Position  # noqa: E402
from kinesis_src.retrieval.polling import ShardReader  # noqa: E402
from kinesis_src.retry import RetryPolicy  # noqa: E402

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.monotonic(), **fields}, default=str)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        settings = AwsSettings.from_env(retry=RetryPolicy(max_attempts=4, initial_backoff_s=0.05, max_backoff_s=0.5, deadline_s=5))
        self.args = args
        self.kinesis = KinesisClient(settings)
        self.table = LeaseTable(DynamoDBClient(settings), args.table, args.application, args.stream)
        self.progress = ProgressStore.of(self.table)
        self.last_held: dict[str, Lease] = {}
        self.coordinator = LeaseCoordinator(
            self.table,
            args.worker_id,
            timing=LeaseTiming(
                failover_s=args.failover, renew_interval_s=args.renew, scan_interval_s=args.scan,
                sync_interval_s=args.sync_interval, max_steals_per_cycle=args.max_steals,
                lease_refresh_interval_s=args.lease_refresh,
            ),
            shard_sync=ShardSync(self.kinesis, self.table, Position.parse(args.initial_position)),
            listener=self,
            on_cycle=self.on_cycle,
        )

    # -- listener --------------------------------------------------------------------------

    def on_acquired(self, lease: Lease) -> None:
        self.last_held[lease.shard_id] = lease
        emit("acquired", worker=self.args.worker_id, shard=lease.shard_id, counter=lease.counter,
             checkpoint=str(lease.checkpoint))
        if self.args.read_on_acquire:
            threading.Thread(target=self.read_from, args=(lease,), daemon=True).start()

    def on_lost(self, lease: Lease, reason: str) -> None:
        emit("lost", worker=self.args.worker_id, shard=lease.shard_id, reason=reason)

    async def before_release(self, lease: Lease) -> None:
        emit("releasing", worker=self.args.worker_id, shard=lease.shard_id)

    def on_cycle(self, report: CycleReport) -> None:
        for shard_id, lease in self.coordinator.held().items():
            self.last_held[shard_id] = lease
        emit("cycle", worker=self.args.worker_id, held=list(report.held), live=list(report.live_workers),
             declared_dead=report.declared_dead, heartbeat=report.heartbeat)

    def read_from(self, lease: Lease) -> None:
        """Where a new owner resumes: read what follows the lease's checkpoint."""
        start = lease.checkpoint.resume_position()
        if start is None:
            return
        try:
            reader = ShardReader(self.kinesis, self.args.stream, lease.shard_id, start, fetch_interval_s=0)
            read = reader.read(max_records=100, until_caught_up=True)
            numbers = [n for page in read.pages for n in page.sequence_numbers]
            emit("read", worker=self.args.worker_id, shard=lease.shard_id, sequence_numbers=numbers, **{"from": str(start)})
        except KinesisSourceError as exc:
            emit("read_failed", worker=self.args.worker_id, shard=lease.shard_id, error=str(exc))

    # -- commands ---------------------------------------------------------------------------

    def handle(self, command: dict[str, Any]) -> bool:
        name = command.get("cmd")
        if name == "stop":
            self.coordinator.stop()
            emit("result", id=command.get("id"), ok=True)
            return False
        try:
            detail = self.run_command(name, command)
        except KinesisSourceError as exc:
            emit("result", id=command.get("id"), ok=False, error=type(exc).__name__, message=str(exc))
        else:
            emit("result", id=command.get("id"), ok=True, **detail)
        return True

    def run_command(self, name: str | None, command: dict[str, Any]) -> dict[str, Any]:
        shard = command.get("shard", "")
        checkpoint = Checkpoint.sequence(str(command.get("sequence", "1")))
        if name == "checkpoint":
            lease = self.coordinator.checkpoint(shard, checkpoint)
            self.last_held[shard] = lease
            return {"counter": lease.counter}
        if name == "checkpoint_stale":
            lease = self.table.checkpoint(self.last_held[shard], checkpoint)
            return {"counter": lease.counter}
        if name == "progress_stale":
            progress = ShardProgress(shard, Position.after_sequence(str(command.get("sequence", "1"))))
            result = self.progress.record_fenced(self.last_held[shard], str(command["run"]), int(command["batch"]), progress)
            return {"recorded": result.recorded}
        raise KinesisSourceError(f"unknown command {name!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--failover", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=1.0)
    parser.add_argument("--scan", type=float, default=None, help="table scan interval (default renew/2)")
    parser.add_argument("--sync-interval", type=float, default=60.0)
    parser.add_argument("--lease-refresh", type=float, default=30.0, help="re-read leases at least this often")
    parser.add_argument("--max-steals", type=int, default=1)
    parser.add_argument("--initial-position", default="trim_horizon")
    parser.add_argument("--read-on-acquire", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("LEASE_WORKER_LOG", "WARNING"), stream=sys.stderr,
                        format=f"{args.worker_id} %(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = Worker(args)
    try:
        worker.table.ensure_table()
        worker.coordinator.start()
    except KinesisSourceError as exc:
        emit("failed", worker=args.worker_id, error=type(exc).__name__, message=str(exc))
        return 3
    emit("started", worker=args.worker_id, pid=os.getpid())
    threading.Thread(target=watch_failure, args=(worker.coordinator,), daemon=True).start()
    for line in sys.stdin:
        if line.strip() and not worker.handle(json.loads(line)):
            return 0
    worker.coordinator.stop()
    return 0


def watch_failure(coordinator: LeaseCoordinator) -> None:
    """A coordinator that stopped on a fatal error ends the process loudly (exit 3)."""
    while coordinator.failure is None:
        time.sleep(0.05)
    error = coordinator.failure
    emit("failed", worker=coordinator.worker_id, error=type(error).__name__, message=str(error))
    os._exit(3)


if __name__ == "__main__":
    sys.exit(main())
