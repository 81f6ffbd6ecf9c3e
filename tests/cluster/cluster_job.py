"""The job the cluster test submits, written as a user would: ``spark-submit --py-files kinesis_src.zip cluster_job.py``.

    cluster_job.py --stream S --out DIR --application A [--available-now] [--max-records-per-shard N]
    cluster_job.py --stream S --batch

Streaming: Kinesis -> Parquet with a checkpoint under DIR; the
processing-time trigger runs until killed, ``--available-now`` exits 0 when
done. ``--batch`` counts the stream with ``spark.read`` and prints the count.
The endpoints come from ``KINESIS_SRC_ENDPOINT_URL`` /
``KINESIS_SRC_DYNAMODB_ENDPOINT_URL`` and are passed as options; credentials
come from the environment of the driver and the workers. The master, the
zip and the Pythons are spark-submit's business, not this script's. The
Parquet sink is the one every streaming job of the tests shares
(tests/parquet_job.py, standard library only at import).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ (not the repository: no kinesis_src there)
from parquet_job import add_job_arguments, kinesis_stream, run_to_parquet


def main() -> int:
    parser = argparse.ArgumentParser()
    add_job_arguments(parser, max_records_per_shard="200", required=False)  # --batch needs only --stream
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--batch", action="store_true")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from kinesis_src import KinesisDataSource  # from the zip on the driver's path

    spark = SparkSession.builder.appName(f"kinesis-src cluster test {args.stream}").getOrCreate()
    # Registered from the job, the source carries the --py-files zip to the executors' Python workers;
    # the one Spark's lookup registers by name carries the driver's PYTHONPATH instead, a path the
    # executors only have where every node has the same file.
    spark.dataSource.register(KinesisDataSource)
    endpoints = {
        "streamName": args.stream,
        "region": os.environ.get("AWS_REGION", "us-east-1"),
        "endpointUrl": os.environ["KINESIS_SRC_ENDPOINT_URL"],
        "dynamodbEndpointUrl": os.environ["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"],
    }
    if args.batch:
        print("count", spark.read.format("kinesis").options(**endpoints).load().count(), flush=True)
        return 0
    options = {**endpoints, "idlePollIntervalMs": "300"}
    trigger = {"availableNow": True} if args.available_now else {"processingTime": "300 milliseconds"}
    return run_to_parquet(kinesis_stream(spark, args, **options), args.out, **trigger)


if __name__ == "__main__":
    sys.exit(main())
