"""Example: move a KCL application (Java or kclpy) to the kinesis-src Consumer without reprocessing or skipping.

    # 1. stop every worker of the KCL application, then:
    python examples/kcl_migration.py --kcl-table orders-kcl --stream orders --application orders-etl --dry-run
    python examples/kcl_migration.py --kcl-table orders-kcl --stream orders --application orders-etl

What it does:
1. ``import_kcl_table`` reads the KCL lease table twice, ``--observe-s`` apart
   (20 s: twice KCL's default failoverTimeMillis), and refuses if any lease
   changed in between (a KCL worker still runs), if the table is not a KCL
   lease table, or if its shards are not the stream's;
2. it prints, per shard, KCL's checkpoint and the lease it becomes; with
   ``--dry-run`` it stops there and writes nothing;
3. otherwise it writes the leases into ``kinesis-src-<application>`` and
   starts a Consumer under that application name: each shard resumes right
   after KCL's checkpoint, children after their parents. ``--max-records``
   stops it after that many records (a demo); Ctrl-C stops it otherwise.

The KCL table is only read: restarting the KCL application instead resumes
from its own checkpoints (and reprocesses what the Consumer did since).
"""

from __future__ import annotations

import argparse
import sys

from kinesis_src import BlockingConsumer
from kinesis_src.leases import KclApplicationRunningError, KclImportError, KclImportReport, import_kcl_table


def show(report: KclImportReport) -> None:
    for shard in report.shards:
        print(f"{shard.shard_id}: KCL {shard.kcl_checkpoint} -> {shard.action.value} {shard.checkpoint or ''} "
              f"{shard.note}".rstrip())
    for skipped in report.skipped_items:
        print(f"skipped {skipped.what} ({skipped.key})")
    if report.left_to_shard_sync:
        print("no KCL lease (the Consumer leases them at TRIM_HORIZON):", ", ".join(report.left_to_shard_sync))
    print("dry run: nothing written" if report.dry_run else f"created {len(report.created)} lease(s)")


def consume(stream: str, application: str, max_records: int | None) -> None:
    """The Consumer that takes over: one batch at a time, checkpointed once processed."""
    seen = 0
    with BlockingConsumer(stream, application_name=application) as consumer:
        for batch in consumer:
            for record in batch.records:
                print(record.shard_id, record.sequence_number, record.partition_key)
            batch.checkpoint()
            seen += len(batch.records)
            if max_records is not None and seen >= max_records:
                consumer.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kcl-table", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--observe-s", type=float, default=20.0)
    parser.add_argument("--max-records", type=int)
    args = parser.parse_args()
    try:
        report = import_kcl_table(args.kcl_table, args.stream, args.application, dry_run=args.dry_run,
                                  observe_s=args.observe_s)
    except (KclImportError, KclApplicationRunningError) as exc:  # nothing was written
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    show(report)
    if not args.dry_run:
        consume(args.stream, args.application, args.max_records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
