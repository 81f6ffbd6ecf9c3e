"""Streaming ETL: Kinesis -> Parquet with Spark, through a live split and merge.

    python examples/spark_streaming_etl.py                 # embedded emulators, temp output dir
    python examples/spark_streaming_etl.py --out /data/orders
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 python examples/spark_streaming_etl.py   # LocalStack

A producer writes ``key-NNN:<counter>`` records for 20 keys while the
stream's shard 0 is split and one of its children is merged with shard 1.
A Structured Streaming query reads the stream with ``format("kinesis")``
and appends to Parquet with a checkpoint (exactly once). At the end the
program reads the committed Parquet files back batch by batch and checks
that every record arrived once and each key's counter only goes up, even
though keys moved from parent shards to children mid-query.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from kinesis_src import AwsSettings
from kinesis_src.aws import KinesisClient
from kinesis_src.testing import KeyedProducer, check_order, read_file_sink

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "localstack"))
import launcher  # noqa: E402  (stdlib only; installs the npm emulators on first use)


def spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master("local[2]")
        .appName("kinesis-src streaming ETL")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # keep one log file per batch so the verification can replay batches in order
        .config("spark.sql.streaming.fileSink.log.compactInterval", "100000")
        .getOrCreate()
    )


def wait_until(condition, timeout_s: float, what: str, query=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None and query.exception() is not None:
            raise SystemExit(f"query failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


def committed(path: Path) -> int:
    try:
        return sum(len(b) for b in read_file_sink(str(path)))
    except FileNotFoundError:
        return 0


def reshard(kinesis: KinesisClient, stream: str, producer: KeyedProducer) -> None:
    """Split shard 0 at its middle, then merge its upper child with shard 1, producing throughout."""
    worker = threading.Thread(target=producer.run_until_stopped, args=(1000,), daemon=True)
    worker.start()

    def more(rounds: int) -> None:
        target = producer.acknowledged + rounds * producer.keys
        wait_until(lambda: producer.acknowledged >= target, 60, "the producer")

    try:
        more(3)
        r = kinesis.list_shards(stream)[0]["HashKeyRange"]
        print("splitting shardId-000000000000 ...", flush=True)
        kinesis.split_shard(stream, "shardId-000000000000", (int(r["StartingHashKey"]) + int(r["EndingHashKey"])) // 2)
        kinesis.wait_active(stream)
        more(3)
        print("merging shardId-000000000003 with shardId-000000000001 ...", flush=True)
        kinesis.merge_shards(stream, "shardId-000000000003", "shardId-000000000001")
        kinesis.wait_active(stream)
        more(3)
    finally:
        producer.stop()
        worker.join(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description="Kinesis -> Parquet through a live split and merge")
    parser.add_argument("--stream", default=f"orders-{int(time.time())}")
    parser.add_argument("--out", help="output directory (default: a temp dir)")
    opts = parser.parse_args()
    out = Path(opts.out or tempfile.mkdtemp(prefix="kinesis-src-etl-"))

    with launcher.endpoints_for_demo(dynamodb=True):
        kinesis = KinesisClient(AwsSettings.from_env(region=os.environ.get("AWS_REGION") or "us-east-1"))
        kinesis.create_stream(opts.stream, 2)
        kinesis.wait_active(opts.stream)
        producer = KeyedProducer(kinesis, opts.stream, keys=20)
        producer.put_rounds(3)

        spark = spark_session()
        query = (
            spark.readStream.format("kinesis")
            .option("streamName", opts.stream)
            .option("initialPosition", "trim_horizon")
            .option("applicationName", f"etl-{opts.stream}")
            .load()
            .writeStream.format("parquet")
            .option("path", str(out / "data"))
            .option("checkpointLocation", str(out / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        print(f"streaming query started; writing Parquet to {out / 'data'}", flush=True)
        try:
            wait_until(lambda: committed(out / "data") > 0, 120, "the first micro-batch", query)
            reshard(kinesis, opts.stream, producer)
            producer.put_rounds(2)
            print(f"produced {producer.acknowledged} records; waiting for the sink to catch up ...", flush=True)
            wait_until(lambda: committed(out / "data") >= producer.acknowledged, 180, "the sink", query)
            lag = (query.lastProgress or {}).get("sources", [{}])[0].get("latestOffset")
        finally:
            query.stop()
            spark.stop()

        batches = read_file_sink(str(out / "data"))
        report = check_order([r for b in batches for r in b], producer.expected())
        print(f"\n{len(batches)} micro-batches committed; records per shard:")
        for shard, count in sorted(report.shards.items()):
            print(f"  {shard}: {count}")
        print(f"last reported lag: {lag}")
        print(report.summary())
        kinesis.delete_stream(opts.stream)
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
