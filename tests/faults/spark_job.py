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
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/: parquet_job
from parquet_job import add_job_arguments, kinesis_stream, local_session, run_to_parquet


def main() -> int:
    parser = argparse.ArgumentParser()
    add_job_arguments(parser, max_records_per_shard="400")
    parser.add_argument("--trigger", choices=("available-now", "processing"), default="processing")
    parser.add_argument("--interval", default="500 milliseconds")
    parser.add_argument("--max-records-per-trigger")
    parser.add_argument("--shards-per-task")
    parser.add_argument("--no-preserve-order", action="store_true")
    args = parser.parse_args()

    spark = local_session("kinesis-src fault campaign job", {"spark.driver.memory": "768m"})
    spark.sparkContext.setLogLevel("ERROR")
    options = {"idlePollIntervalMs": "300", "preserveShardOrder": "false" if args.no_preserve_order else "true"}
    if args.max_records_per_trigger:
        options["maxRecordsPerTrigger"] = args.max_records_per_trigger
    if args.shards_per_task:
        options["shardsPerTask"] = args.shards_per_task
    trigger = {"availableNow": True} if args.trigger == "available-now" else {"processingTime": args.interval}
    return run_to_parquet(kinesis_stream(spark, args, **options), args.out, **trigger)


if __name__ == "__main__":
    sys.exit(main())
