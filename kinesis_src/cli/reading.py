"""``kinesis-src read`` and ``export``: every shard parent-first, as JSON lines, Parquet or JSON lines files."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..aws import KinesisClient
from ..drain import drain_stream
from ..errors import ConfigurationError
from ..positions import Position, format_timestamp
from ..record_progress import record_progress
from ..records import Record
from ..table_rows import record_of_row
from ..window import read_table

EXPORT_FORMATS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}


def read_command(kinesis: KinesisClient, stream: str, start: Position, out: TextIO, progress: bool) -> int:
    with record_progress(stream, None if progress else False) as bar:
        for chunk in drain_stream(kinesis, stream, start):
            out.writelines(json.dumps(_as_json(record)) + "\n" for record in chunk.records())
            bar.add(chunk.record_count)
            bar.note(chunk.shard_id)
    out.flush()
    return 0


def export_command(kinesis: KinesisClient, args: argparse.Namespace) -> int:
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
            out.writelines(json.dumps(_as_json(record_of_row(row))) + "\n" for row in batch.to_pylist())


_WRITERS = {"parquet": _write_parquet, "jsonl": _write_jsonl}


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


