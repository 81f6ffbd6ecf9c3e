#!/usr/bin/env python3
"""The fault campaign's Spark streaming job, run as its own process: Kinesis -> Parquet with a checkpoint.

    python tests/faults/spark_job.py --stream S --out DIR --application A [--trigger available-now|processing]
        [--max-records-per-trigger N] [--shards-per-task N] [--no-preserve-order] [--max-records-per-shard N]

Endpoints and dummy credentials come from the environment (the campaign
points them at the fault proxies; Spark's Python workers inherit them).
With the processing-time trigger it runs until killed; AvailableNow exits
0 when done, 1 if the query failed (the error is printed on stderr).
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
    parser.add_argument("--trigger", choices=("available-now", "processing"), default="processing")
    parser.add_argument("--interval", default="500 milliseconds")
    parser.add_argument("--max-records-per-shard", default="400")
    parser.add_argument("--max-records-per-trigger")
    parser.add_argument("--shards-per-task")
    parser.add_argument("--no-preserve-order", action="store_true")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kinesis-src fault campaign job")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.streaming.fileSink.log.compactInterval", "100000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    reader = (
        spark.readStream.format("kinesis")
        .option("streamName", args.stream)
        .option("initialPosition", "trim_horizon")
        .option("applicationName", args.application)
        .option("maxRecordsPerShard", args.max_records_per_shard)
        .option("fetchIntervalMs", "0")
        .option("idlePollIntervalMs", "300")
        .option("preserveShardOrder", "false" if args.no_preserve_order else "true")
    )
    if args.max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", args.max_records_per_trigger)
    if args.shards_per_task:
        reader = reader.option("shardsPerTask", args.shards_per_task)
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", os.path.join(args.out, "data"))
        .option("checkpointLocation", os.path.join(args.out, "checkpoint"))
    )
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.interval)
    query = writer.start()
    print("started", flush=True)
    try:
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001 - reported on stderr, exit code 1
        print(f"query failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main())
