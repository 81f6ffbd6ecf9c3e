"""``kinesis-src leases import-kcl``: start an application from a stopped KCL lease table.

``leases`` takes an application name first, so :func:`route` renames this command before parsing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

from ..aws import KinesisClient
from ..aws.dynamodb_scan import ScanningDynamoDBClient
from ..config import AwsSettings
from ..leases.kcl_import import DEFAULT_OBSERVE_S, KclImport, KclImportReport
from ..leases.model import Checkpoint
from .output import Screen

COMMAND = "leases-import-kcl"  # what route() turns "leases import-kcl" into
HEADERS = ("shard", "KCL checkpoint", "action", "checkpoint", "parents", "note")


def route(argv: Sequence[str]) -> list[str]:
    """``... leases import-kcl ...`` -> ``... leases-import-kcl ...``; anything else unchanged."""
    args = list(argv)
    for i, token in enumerate(args[:-1]):
        if token == "leases":
            if args[i + 1] == "import-kcl":
                return [*args[:i], COMMAND, *args[i + 2:]]
            break
    return args


def add_parser(sub: argparse._SubParsersAction) -> None:
    command = sub.add_parser(
        COMMAND, prog="kinesis-src leases import-kcl",
        help="(as `leases import-kcl`) import a stopped KCL 2.x/3.x application's checkpoints",
        description="Create an application's leases from a stopped KCL application's lease table: each shard's "
                    "checkpoint, SHARD_END and parents. The KCL table is only read.",
    )
    command.add_argument("--kcl-table", required=True, help="the KCL application's lease table (its applicationName)")
    command.add_argument("--stream", required=True, help="the stream the KCL application read")
    command.add_argument("--application", required=True, help="the kinesis-src application_name to start")
    command.add_argument("--table", help="lease table to write (default: kinesis-src-<application>)")
    command.add_argument("--dynamodb-endpoint-url", help="default: KINESIS_SRC_DYNAMODB_ENDPOINT_URL or AWS")
    command.add_argument("--dry-run", action="store_true", help="check and show what would be imported; write nothing")
    command.add_argument("--observe-s", type=float, default=DEFAULT_OBSERVE_S,
                         help="watch the KCL leases this long for a running worker (default 20: twice KCL's "
                              "default failoverTimeMillis)")
    command.add_argument("--unstarted-from", default="trim_horizon", metavar="trim_horizon|TIMESTAMP",
                         help="where shards with a LATEST or AT_TIMESTAMP KCL checkpoint (nothing processed) start: "
                              "trim_horizon (default, skips nothing) or an ISO-8601 timestamp")
    command.add_argument("--json", action="store_true", help="print the report as JSON")


def command(settings: AwsSettings, args: argparse.Namespace, out: TextIO) -> int:
    job = KclImport(
        ScanningDynamoDBClient(settings), KinesisClient(settings), args.kcl_table, args.stream, args.application,
        lease_table_name=args.table, observe_s=args.observe_s, unstarted=_unstarted(args.unstarted_from),
    )
    report = job.run(dry_run=args.dry_run)
    screen = Screen(out)
    if args.json:
        screen.json(report.to_dict())
    else:
        show(report, screen)
    return 0


def _unstarted(text: str) -> Checkpoint:
    if text.strip().lower() == "trim_horizon":
        return Checkpoint.trim_horizon()
    return Checkpoint.at_timestamp(text)


def show(report: KclImportReport, screen: Screen) -> None:
    """The report as a title, one row per KCL lease, and what was skipped, left or written."""
    what = "dry run, nothing written" if report.dry_run else "imported"
    rows = [
        (s.shard_id, _kcl_checkpoint(s.kcl_checkpoint, s.kcl_sub_sequence_number), s.action.value,
         "-" if s.checkpoint is None else str(s.checkpoint), " + ".join(s.parent_shard_ids) or "-", s.note)
        for s in report.shards
    ]
    screen.table(HEADERS, rows, title=f"KCL table {report.kcl_table} -> lease table {report.lease_table} "
                                      f"(application {report.application}, stream {report.stream}): {what}")
    if report.skipped_items:
        skipped = ", ".join(f"{s.what} ({s.key})" for s in report.skipped_items)
        screen.line(f"skipped {len(report.skipped_items)} non-lease item(s): {skipped}")
    if report.left_to_shard_sync:
        screen.line("no KCL lease, left to the consumer's shard sync (TRIM_HORIZON, after their parents): "
                    + ", ".join(report.left_to_shard_sync))
    imported = sum(1 for s in report.shards if s.checkpoint is not None)
    if report.dry_run:
        screen.line(f"would create {imported} lease(s); run again without --dry-run to write them")
    else:
        screen.line(f"created {len(report.created)} lease(s) ({imported - len(report.created)} already there). "
                    f"Start the consumer with application_name={report.application!r}, "
                    f"lease_table_name={report.lease_table!r}; keep the KCL application stopped.")


def _kcl_checkpoint(text: str, sub: int) -> str:
    return f"{text}/{sub}" if sub else text
