"""``kinesis-src lineage`` and ``leases``: gather what the views draw (the only I/O of those commands)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import TextIO

from ..aws import KinesisClient
from ..aws.dynamodb import DynamoDBClient
from ..discovery import ShardDiscovery
from ..errors import ConfigurationError, KinesisSourceError, ResourceNotFoundError
from ..leases.model import Lease
from ..leases.table import LeaseTable
from ..names import default_table_name
from ..record_progress import record_progress
from ..retrieval.polling import ShardReader
from . import leases_view, lineage_view, status_view
from .output import Screen
from .shard_figures import WORKERS, shard_figures


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def lineage_command(
    kinesis: KinesisClient, args: argparse.Namespace, out: TextIO, now: Callable[[], datetime] = _utc_now
) -> int:
    summary = kinesis.describe_stream(args.stream)
    discovery = ShardDiscovery(kinesis, args.stream)
    discovery.refresh()
    graph = discovery.graph
    drawing = args.dot or args.svg or args.png
    figures: Mapping[str, lineage_view.ShardFigures] = {}
    if args.count or not drawing:  # a drawing shows no ages: skip the probe unless counting
        with record_progress(args.stream, None if args.count else False) as counted:
            figures = shard_figures(kinesis, args.stream, graph.shard_ids(), args.count, counted.add)
    rows = lineage_view.lineage_rows(graph, figures, now())
    screen = Screen(out)
    if args.json:
        screen.json(lineage_view.as_json(args.stream, summary.retention_hours, graph, rows))
    elif drawing:
        dot = lineage_view.as_dot(args.stream, rows, graph)
        if args.dot:
            out.write(dot)
        else:
            _draw(dot, "svg" if args.svg else "png", args.svg or args.png)
    else:
        screen.table(lineage_view.headers(args.count), [lineage_view.row_cells(r, args.count) for r in rows],
                     title=lineage_view.header_line(args.stream, graph, summary.retention_hours))
    return 0


def _draw(dot: str, fmt: str, path: str) -> None:
    """Render with Graphviz; without it, say how to get it or how to draw elsewhere."""
    exe = shutil.which("dot")
    if exe is None:
        raise ConfigurationError(
            f"--{fmt} needs Graphviz's `dot` on PATH (install graphviz, e.g. `apt install graphviz` or "
            "`brew install graphviz`), or print the graph with --dot and render it elsewhere"
        )
    done = subprocess.run([exe, f"-T{fmt}", "-o", path], check=False, input=dot, text=True, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise KinesisSourceError(f"Graphviz could not draw {path!r}: {done.stderr.strip() or done.returncode}")


def leases_command(
    dynamodb: DynamoDBClient, kinesis: KinesisClient, args: argparse.Namespace, out: TextIO,
    now_ms: Callable[[], int] = _wall_ms,
) -> int:
    table = _open_table(dynamodb, args)
    table_name = table.table_name
    view = table.scan()
    if not view.leases and not view.workers:
        raise ResourceNotFoundError(
            f"lease table {table_name!r} holds no leases and no workers of application {args.application!r} on "
            f"stream {args.stream!r}: check the application name and --stream (has it run yet?)"
        )
    lag = {} if args.no_lag else lease_lag(kinesis, args.stream, view.leases.values())
    leases = leases_view.lease_rows(view, lag)
    workers = leases_view.worker_rows(view, now_ms(), args.failover_s)
    screen = Screen(out)
    if args.json:
        screen.json(leases_view.as_json(table_name, args.application, args.stream, leases, workers))
        return 0
    screen.line(leases_view.summary_line(table_name, args.application, args.stream, leases, workers))
    screen.table(leases_view.LEASE_HEADERS, [leases_view.lease_cells(r) for r in leases])
    if workers:
        screen.table(leases_view.WORKER_HEADERS, [leases_view.worker_cells(w) for w in workers])
    return 0


def status_command(
    dynamodb: DynamoDBClient, kinesis: KinesisClient, args: argparse.Namespace, out: TextIO,
    now_ms: Callable[[], int] = _wall_ms, sleep: Callable[[float], None] = time.sleep,
) -> int:
    """One status table; with ``--watch S``, a new one every S seconds until interrupted (or ``--count`` times)."""
    if (args.watch is not None and args.watch <= 0) or (args.rounds is not None and args.rounds < 1):
        raise ConfigurationError("--watch takes a positive number of seconds, --rounds a positive count")
    table = _open_table(dynamodb, args)
    rounds = 0
    while True:
        view = table.scan()
        if not view.leases:
            raise ResourceNotFoundError(
                f"lease table {table.table_name!r} holds no leases of application {args.application!r} on stream "
                f"{args.stream!r}: check the application name and --stream (a Spark query keeps no leases: its "
                "per-shard figures are in the query's progress, `query.lastProgress['sources']`)"
            )
        rows = status_view.shard_statuses(view, lease_lag(kinesis, args.stream, view.leases.values()), now_ms())
        claim = table.read_claim()
        screen = Screen(out)
        if args.json:
            screen.json(status_view.as_json(args.application, args.stream, rows, view.workers, claim))
        else:
            screen.table(status_view.HEADERS, [status_view.cells(r) for r in rows],
                         title=status_view.summary(args.application, args.stream, rows, view.workers, claim))
        out.flush()
        rounds += 1
        if args.watch is None or (args.rounds is not None and rounds >= args.rounds):
            return 0
        sleep(args.watch)


def _open_table(dynamodb: DynamoDBClient, args: argparse.Namespace) -> LeaseTable:
    table = LeaseTable(dynamodb, args.table or default_table_name(args.application), args.application, args.stream)
    table.ensure_table(create=False)
    return table


def lease_lag(kinesis: KinesisClient, stream: str, leases: Iterable[Lease]) -> dict[str, int | None]:
    """MillisBehindLatest at each unfinished lease's checkpoint: one GetRecords of one record per shard."""
    todo = [lease for lease in leases if not lease.is_shard_end]
    if not todo:
        return {}
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(todo)), thread_name_prefix="kinesis-src-lag") as pool:
        return dict(zip((lease.shard_id for lease in todo), pool.map(lambda lease: _lag(kinesis, stream, lease), todo)))


def _lag(kinesis: KinesisClient, stream: str, lease: Lease) -> int | None:
    """None where Kinesis cannot say (the shard expired, or the checkpoint is past retention)."""
    position = lease.checkpoint.resume_position()
    if position is None:
        return None
    try:
        return ShardReader(kinesis, stream, lease.shard_id, position).fetch(limit=1).millis_behind_latest
    except KinesisSourceError:
        return None
