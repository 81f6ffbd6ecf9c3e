"""What the tests' Kinesis -> Parquet streaming jobs share; each job runs as its own process.

tests/spark/stream_job.py (the crash test), tests/faults/spark_job.py (the
fault campaign) and tests/cluster/cluster_job.py (spark-submit on a
standalone cluster) differ in their session, options and trigger. The
stream's common options and the sink are here: Parquet and its checkpoint
under one directory, ``started`` on stdout once the query runs, the exit
code from how the query ended. Only the standard library is imported at
module level: the cluster's driver Python has PySpark and nothing of the
project but what the job is given.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamReader


def add_job_arguments(parser: argparse.ArgumentParser, max_records_per_shard: str, required: bool = True) -> None:
    """``--stream``, ``--out``, ``--application`` (``required`` or not) and ``--max-records-per-shard``: what
    :func:`kinesis_stream` and :func:`run_to_parquet` are given."""
    parser.add_argument("--stream", required=True)
    parser.add_argument("--out", required=required)
    parser.add_argument("--application", required=required)
    parser.add_argument("--max-records-per-shard", default=max_records_per_shard)


def local_session(app_name: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A ``local[2]`` session whose Python workers run this interpreter: UI off, the file sink's log never
    compacted (a test reads it), ``conf`` on top."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {"spark.ui.enabled": "false", "spark.sql.streaming.fileSink.log.compactInterval": "100000",
                       **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def kinesis_stream(spark: SparkSession, args: argparse.Namespace, **options: str) -> DataStreamReader:
    """``args.stream`` from TRIM_HORIZON as ``args.application``, ``args.max_records_per_shard`` a shard per
    batch, no pause between GetRecords calls; ``options`` on top."""
    return (
        spark.readStream.format("kinesis")
        .option("streamName", args.stream)
        .option("initialPosition", "trim_horizon")
        .option("applicationName", args.application)
        .option("maxRecordsPerShard", args.max_records_per_shard)
        .option("fetchIntervalMs", "0")
        .options(**options)
    )


def run_to_parquet(reader: DataStreamReader, out: str, **trigger: Any) -> int:
    """Write the stream as Parquet under ``out`` (``data``, ``checkpoint``) with ``trigger`` until the query
    ends: 0 when it ended well, 1 when it failed (the error printed on stderr)."""
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", os.path.join(out, "data"))
        .option("checkpointLocation", os.path.join(out, "checkpoint"))
        .trigger(**trigger)
        .start()
    )
    print("started", flush=True)
    try:
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001 - reported on stderr, exit code 1
        print(f"query failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0 if query.exception() is None else 1
