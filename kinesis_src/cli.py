"""The ``kinesis-src`` command: look at a stream's lineage, read it in lineage order.

The only module that prints or exits. Errors from the library become one
line on stderr and exit status 2 (bad input) or 1 (anything else).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
from typing import Sequence, TextIO

from .aws import KinesisClient
from .config import AwsSettings
from .discovery import ShardDiscovery
from .drain import drain_stream
from .errors import ConfigurationError, KinesisSourceError, ResourceNotFoundError
from .positions import Position, format_timestamp


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kinesis-src", description="Inspect and read Kinesis streams in shard-lineage order."
    )
    parser.add_argument("--region", help="AWS region (default: AWS_REGION / AWS_DEFAULT_REGION)")
    parser.add_argument("--endpoint-url", help="Kinesis endpoint (default: KINESIS_SRC_ENDPOINT_URL or AWS)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        kinesis = KinesisClient(AwsSettings.from_env(region=args.region, endpoint_url=args.endpoint_url))
        if args.command == "shards":
            return _shards(kinesis, args.stream, args.json, sys.stdout)
        return _read(kinesis, args.stream, _start(args.start), args.output, not args.no_progress)
    except (ConfigurationError, ResourceNotFoundError) as exc:
        print(f"kinesis-src: {exc}", file=sys.stderr)
        return 2
    except KinesisSourceError as exc:
        print(f"kinesis-src: {exc}", file=sys.stderr)
        return 1


def _start(text: str) -> Position:
    keyword = text.strip().lower()
    if keyword in ("trim_horizon", "earliest", "latest"):
        return Position.parse(keyword)
    return Position.at_timestamp(text)


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


def _read(kinesis: KinesisClient, stream: str, start: Position, out: TextIO, progress: bool) -> int:
    from tqdm import tqdm

    with tqdm(unit=" rec", disable=not progress, file=sys.stderr, desc=stream) as bar:
        for chunk in drain_stream(kinesis, stream, start):
            for record in chunk.records():
                out.write(json.dumps(_as_json(record)) + "\n")
            bar.update(chunk.record_count)
            bar.set_postfix_str(chunk.shard_id)
    out.flush()
    return 0


def _as_json(record) -> dict:
    ts = record.approximate_arrival_timestamp
    return {
        "shardId": record.shard_id,
        "sequenceNumber": record.sequence_number,
        "partitionKey": record.partition_key,
        "approximateArrivalTimestamp": format_timestamp(ts) if ts else None,
        "data": base64.b64encode(record.data).decode(),
    }


if __name__ == "__main__":
    sys.exit(main())
