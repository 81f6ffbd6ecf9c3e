"""Backfill: export one time window of a Kinesis stream to Parquet with a Spark batch read.

    python examples/backfill_batch.py --stream orders --start 2026-11-01T00:00:00Z --end 2026-11-02T00:00:00Z --out /data/orders-2026-11-01
    python examples/backfill_batch.py --demo      # make a resharded stream on the embedded emulators and export it

The batch read lists every shard that may hold records in the window,
closed ones within retention included, and reads them parents-first; the
written files keep that order, so each key's records appear in write order.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "localstack"))
import launcher  # noqa: E402  (stdlib only; installs the npm emulators on first use)


def export(spark, stream: str, start: str | None, end: str | None, out: str) -> int:
    reader = spark.read.format("kinesis").option("streamName", stream)
    if start:
        reader = reader.option("initialPosition", "at_timestamp").option("startingTimestamp", start)
    if end:
        reader = reader.option("endingTimestamp", end)
    df = reader.load()
    df.write.mode("overwrite").parquet(out)
    return spark.read.parquet(out).count()


def make_demo_stream(stream: str) -> None:
    from kinesis_src import AwsSettings
    from kinesis_src.aws import KinesisClient
    from kinesis_src.testing import KeyedProducer

    kinesis = KinesisClient(AwsSettings.from_env(region=os.environ.get("AWS_REGION") or "us-east-1"))
    kinesis.create_stream(stream, 2)
    kinesis.wait_active(stream)
    producer = KeyedProducer(kinesis, stream, keys=10)
    producer.put_rounds(5)
    kinesis.split_shard(stream, "shardId-000000000000", 2**126)
    kinesis.wait_active(stream)
    producer.put_rounds(5)
    print(f"demo stream {stream!r}: {producer.acknowledged} records across a split", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description="Export a time window of a Kinesis stream to Parquet")
    parser.add_argument("--stream", default=f"backfill-{int(datetime.now().timestamp())}")
    parser.add_argument("--start", help="ISO-8601 (default: the oldest record in retention)")
    parser.add_argument("--end", help="ISO-8601 (default: now)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--demo", action="store_true", help="create and fill a demo stream first")
    opts = parser.parse_args()
    out = opts.out or tempfile.mkdtemp(prefix="kinesis-src-backfill-")

    from pyspark.sql import SparkSession

    with launcher.endpoints_for_demo(dynamodb=False):
        if opts.demo:
            make_demo_stream(opts.stream)
            opts.start = opts.start or (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = SparkSession.builder.master("local[2]").appName("kinesis-src backfill").getOrCreate()
        try:
            rows = export(spark, opts.stream, opts.start, opts.end, out)
        finally:
            spark.stop()
    print(f"wrote {rows} records of {opts.stream!r} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
