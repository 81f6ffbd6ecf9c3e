"""The ``kinesis-src`` command: a stream's lineage, an application's leases, reads and exports.

The only package that prints or exits: errors are one stderr line and status 2 (bad input) or 1;
a closed pipe ends quietly with 141.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from ..aws import KinesisClient
from ..aws.dynamodb import DynamoDBClient
from ..config import AwsSettings, CredentialSource
from ..discovery import ShardDiscovery
from ..errors import ConfigurationError, KinesisSourceError, ResourceNotFoundError
from ..positions import Position, PositionForm
from . import kcl_import_view
from .inspect import leases_command, lineage_command, status_command
from .reading import EXPORT_FORMATS, export_command, export_format, read_command

EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE
EXIT_INTERRUPTED = 130  # 128 + SIGINT
_FROM_FORMS = frozenset({PositionForm.KEYWORD, PositionForm.TIMESTAMP})  # read --from
__all__ = ["EXPORT_FORMATS", "build_parser", "export_format", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kinesis-src", description="Inspect and read Kinesis streams in shard-lineage order."
    )
    parser.add_argument("--region", help="AWS region (default: AWS_REGION / AWS_DEFAULT_REGION)")
    parser.add_argument("--endpoint-url", help="Kinesis endpoint (default: KINESIS_SRC_ENDPOINT_URL or AWS)")
    parser.add_argument("--profile", help="a profile of the shared AWS config (default: AWS_PROFILE or none)")
    parser.add_argument("--role-arn", help="assume this IAM role with the credentials found (renewed as it runs)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    shards = sub.add_parser("shards", help="print the stream's shard lineage")
    shards.add_argument("stream")
    shards.add_argument("--json", action="store_true", help="print the lineage graph as JSON")

    read = sub.add_parser("read", help="read every shard parent-first up to the tip, as JSON lines")
    read.add_argument("stream")
    read.add_argument(
        "--from",
        dest="start",
        default="trim_horizon",
        help="trim_horizon (default), earliest, latest, or an ISO-8601 timestamp",
    )
    read.add_argument("--output", type=argparse.FileType("w"), default=sys.stdout, help="file (default stdout)")
    read.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    export = sub.add_parser(
        "export", help="write the records that arrived in [start, end) parent-first to Parquet or JSON lines"
    )
    export.add_argument("stream")
    export.add_argument(
        "--start",
        default="trim_horizon",
        help="inclusive: trim_horizon (default), earliest, latest (now), or an ISO-8601 timestamp (no offset = UTC)",
    )
    export.add_argument(
        "--end",
        default="latest",
        help="exclusive: latest (default: the moment the export starts) or an ISO-8601 timestamp",
    )
    export.add_argument("--output", "-o", required=True, help="file to write (.parquet, .jsonl or .json)")
    export.add_argument("--format", choices=["parquet", "jsonl"], help="default: from the --output suffix")
    export.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _lineage_parser(sub)
    _leases_parser(sub)
    kcl_import_view.add_parser(sub)
    _status_parser(sub)
    return parser


def _lineage_parser(sub: argparse._SubParsersAction) -> None:
    lineage = sub.add_parser("lineage", help="draw the shard tree from roots to open shards")
    lineage.add_argument("stream")
    lineage.add_argument("--count", action="store_true", help="read every shard and count its records and bytes")
    shape = lineage.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the tree as JSON")
    shape.add_argument("--dot", action="store_true", help="print a Graphviz digraph")
    shape.add_argument("--svg", metavar="FILE", help="draw the tree into an SVG file (needs Graphviz's dot)")
    shape.add_argument("--png", metavar="FILE", help="draw the tree into a PNG file (needs Graphviz's dot)")


def _application_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("application", help="the applicationName (application_name) of the query or consumer")
    command.add_argument("--stream", required=True, help="the stream the application reads")
    command.add_argument("--table", help="lease table (default: kinesis-src-<application>)")
    command.add_argument("--dynamodb-endpoint-url", help="default: KINESIS_SRC_DYNAMODB_ENDPOINT_URL or AWS")


def _status_parser(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="per-shard lag and throughput of a running consumer")
    _application_arguments(status)
    status.add_argument("--watch", type=float, metavar="SECONDS", help="show it again every SECONDS until Ctrl-C")
    status.add_argument("--rounds", type=int, help="with --watch: stop after this many tables")
    status.add_argument("--json", action="store_true", help="print it as JSON (one document per round)")


def _leases_parser(sub: argparse._SubParsersAction) -> None:
    leases = sub.add_parser("leases", help="show an application's lease table: leases and workers")
    _application_arguments(leases)
    leases.add_argument("--no-lag", action="store_true", help="do not ask Kinesis how far each lease is behind")
    leases.add_argument("--failover-s", type=float, default=10.0,
                        help="heartbeat age after which a worker is shown stale (default 10, the failover_s default)")
    leases.add_argument("--json", action="store_true", help="print the table as JSON")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a closed stdout is a normal way for a pipeline to end, not an error."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # here, not at interpreter exit, where EPIPE cannot be caught
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:  # Ctrl-C ends `status --watch` (or any long command): not an error to report
        return EXIT_INTERRUPTED


def _closed_pipe() -> int:
    """Point stdout at /dev/null so the interpreter's final flush of what is buffered stays silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a replaced sys.stdout (in-process callers) has no fd
        pass
    finally:
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(kcl_import_view.route(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = AwsSettings.from_env(region=args.region, endpoint_url=args.endpoint_url,
                                        dynamodb_endpoint_url=getattr(args, "dynamodb_endpoint_url", None),
                                        credentials=CredentialSource(profile=args.profile, role_arn=args.role_arn))
        kinesis = KinesisClient(settings)
        if args.command == "shards":
            return _shards(kinesis, args.stream, args.json, sys.stdout)
        if args.command == "lineage":
            return lineage_command(kinesis, args, sys.stdout)
        if args.command == "leases":
            return leases_command(DynamoDBClient(settings), kinesis, args, sys.stdout)
        if args.command == kcl_import_view.COMMAND:
            return kcl_import_view.command(settings, args, sys.stdout)
        if args.command == "status":
            return status_command(DynamoDBClient(settings), kinesis, args, sys.stdout)
        if args.command == "export":
            return export_command(kinesis, args)
        start = Position.parse(args.start, forms=_FROM_FORMS)
        return read_command(kinesis, args.stream, start, args.output, not args.no_progress)
    except (ConfigurationError, ResourceNotFoundError) as exc:
        print(f"kinesis-src: {exc}", file=sys.stderr)
        return 2
    except KinesisSourceError as exc:
        print(f"kinesis-src: {exc}", file=sys.stderr)
        return 1


def _shards(kinesis: KinesisClient, stream: str, as_json: bool, out: TextIO) -> int:
    discovery = ShardDiscovery(kinesis, stream)
    discovery.refresh()
    graph = discovery.graph
    if as_json:
        out.write(graph.to_json() + "\n")
        return 0
    out.write(f"{'shard':<22}{'state':<8}{'parents':<46}hash range\n")
    for shard_id in graph.shard_ids():
        r = graph.hash_range(shard_id)
        share = (r.end - r.start + 1) / 2**128
        state = "open" if graph.is_open(shard_id) else "closed"
        parents = " + ".join(graph.parents(shard_id)) or "-"
        out.write(f"{shard_id:<22}{state:<8}{parents:<46}{share:7.2%} from {r.start}\n")
    return 0


