"""The job the cluster test submits, written as a user would: ``spark-submit --py-files kinesis_src.zip cluster_job.py``.

    cluster_job.py --stream S --out DIR --application A [--available-now] [--max-records-per-shard N]
    cluster_job.py --stream S --batch

Streaming: Kinesis -> Parquet with a checkpoint under DIR; the
processing-time trigger runs until killed, ``--available-now`` exits 0 when
done. ``--batch`` counts the stream with ``spark.read`` and prints the count.
The endpoints come from ``KINESIS_SRC_ENDPOINT_URL`` /
``KINESIS_SRC_DYNAMODB_ENDPOINT_URL`` and are passed as options; credentials
come from the environment of the driver and the workers. The master, the
zip and the Pythons are spark-submit's business, not this script's.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", required=True)
    parser.add_argument("--out")
    parser.add_argument("--application")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-records-per-shard", default="200")
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
    writer = (
        spark.readStream.format("kinesis").options(**endpoints)
        .option("initialPosition", "trim_horizon")
        .option("applicationName", args.application)
        .option("maxRecordsPerShard", args.max_records_per_shard)
        .option("fetchIntervalMs", "0")
        .option("idlePollIntervalMs", "300")
        .load()
        .writeStream.format("parquet")
        .option("path", os.path.join(args.out, "data"))
        .option("checkpointLocation", os.path.join(args.out, "checkpoint"))
    )
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="300 milliseconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main())
