"""The ``kinesis-src`` command: look at a stream's lineage, read it in lineage order, export a window.

The only module that prints or exits. Errors from the library become one
line on stderr and exit status 2 (bad input) or 1 (anything else). A reader
that goes away early (``kinesis-src read STREAM | head``) ends any command
quietly with status 141, what a shell reports for a process stopped by
SIGPIPE, instead of a BrokenPipeError traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Sequence, TextIO

from .aws import KinesisClient
from .config import AwsSettings
from .discovery import ShardDiscovery
from .drain import drain_stream
from .errors import ConfigurationError, KinesisSourceError, ResourceNotFoundError
from .positions import Position, format_timestamp
from .records import Record
from .window import read_table

EXPORT_FORMATS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a closed stdout is a normal way for a pipeline to end, not an error."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # here, not at interpreter exit, where EPIPE cannot be caught
    except BrokenPipeError:
        return _closed_pipe()


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
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        kinesis = KinesisClient(AwsSettings.from_env(region=args.region, endpoint_url=args.endpoint_url))
        if args.command == "shards":
            return _shards(kinesis, args.stream, args.json, sys.stdout)
        if args.command == "export":
            return _export(kinesis, args)
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


def _export(kinesis: KinesisClient, args: argparse.Namespace) -> int:
    """Read the window into one table, write it, then say what was written (one line on stderr)."""
    fmt = export_format(args.output, args.format)
    path = Path(args.output)
    if not path.parent.is_dir():  # before a long read, not after
        raise ConfigurationError(f"cannot write {args.output!r}: directory {str(path.parent)!r} does not exist")
    table = read_table(
        args.stream, args.start, args.end, kinesis=kinesis, progress=False if args.no_progress else None
    )
    try:
        _write_atomically(path, lambda tmp: _WRITERS[fmt](table, tmp))
    except OSError as exc:
        print(f"kinesis-src: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return 1
    shards = len(set(table.column("shardId").to_pylist()))
    print(
        f"kinesis-src: exported {table.num_rows} records from {shards} shard{'' if shards == 1 else 's'} "
        f"to {args.output} ({fmt})",
        file=sys.stderr,
    )
    return 0


def export_format(output: str, given: str | None) -> str:
    """``--format`` if given, else from the file suffix; anything else is a usage error."""
    if given:
        return given
    fmt = EXPORT_FORMATS.get(Path(output).suffix.lower())
    if fmt is None:
        raise ConfigurationError(
            f"cannot tell the export format of {output!r} from its suffix: name it .parquet, .jsonl or "
            ".json, or pass --format parquet|jsonl"
        )
    return fmt


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write next to the target and rename, so a failed export never leaves a half-written file behind."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_parquet(table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


def _write_jsonl(table, path: Path) -> None:
    """The same JSON object per record as the ``read`` command."""
    with open(path, "w") as out:
        for batch in table.to_batches():
            for row in batch.to_pylist():
                out.write(json.dumps(_as_json(_row_record(row))) + "\n")


_WRITERS = {"parquet": _write_parquet, "jsonl": _write_jsonl}


def _row_record(row: dict) -> Record:
    return Record(
        partition_key=row["partitionKey"],
        data=row["data"],
        sequence_number=row["sequenceNumber"],
        sub_sequence_number=row["subSequenceNumber"],
        shard_id=row["shardId"],
        approximate_arrival_timestamp=row["approximateArrivalTimestamp"],
    )


def _as_json(record: Record) -> dict:
    """One JSON line: a KPL user record is told apart by ``subSequenceNumber`` (0 for a plain record)."""
    ts = record.approximate_arrival_timestamp
    line = {
        "shardId": record.shard_id,
        "sequenceNumber": record.sequence_number,
        "subSequenceNumber": record.sub_sequence_number,
        "partitionKey": record.partition_key,
    }
    if record.explicit_hash_key is not None:
        line["explicitHashKey"] = record.explicit_hash_key
    line["approximateArrivalTimestamp"] = format_timestamp(ts) if ts else None
    line["data"] = base64.b64encode(record.data).decode()
    return line


if __name__ == "__main__":
    sys.exit(main())
