"""A streaming job run as its own process by the crash test: Kinesis -> Parquet with a checkpoint.

    python tests/spark/stream_job.py --stream S --out DIR --application A [--available-now]

Endpoints and dummy credentials come from the environment (the test passes
the emulators' settings). Without --available-now it runs until killed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/: parquet_job
from parquet_job import add_job_arguments, kinesis_stream, local_session, run_to_parquet


def main() -> int:
    parser = argparse.ArgumentParser()
    add_job_arguments(parser, max_records_per_shard="1000")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()

    spark = local_session("kinesis-src crash test job")
    trigger = {"availableNow": True} if args.available_now else {"processingTime": "100 milliseconds"}
    return run_to_parquet(kinesis_stream(spark, args), args.out, **trigger)


if __name__ == "__main__":
    sys.exit(main())
