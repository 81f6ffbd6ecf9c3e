"""A streaming job run as its own process by the crash test: Kinesis -> Parquet with a checkpoint.

    python tests/spark/stream_job.py --stream S --out DIR --application A [--available-now]

Endpoints and dummy credentials come from the environment (the test passes
the emulators' settings). Without --available-now it runs until killed.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--max-records-per-shard", default="1000")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kinesis-src crash test job")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.fileSink.log.compactInterval", "100000")
        .getOrCreate()
    )
    writer = (
        spark.readStream.format("kinesis")
        .option("streamName", args.stream)
        .option("initialPosition", "trim_horizon")
        .option("applicationName", args.application)
        .option("maxRecordsPerShard", args.max_records_per_shard)
        .option("fetchIntervalMs", "0")
        .load()
        .writeStream.format("parquet")
        .option("path", os.path.join(args.out, "data"))
        .option("checkpointLocation", os.path.join(args.out, "checkpoint"))
    )
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="100 milliseconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main())
