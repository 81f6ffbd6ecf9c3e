"""Benchmark (issue #12, target 2): bounded reads of independent shards at the same time.

    .venv/bin/python benchmarks/bench_bounded.py          # ~1-2 min; loopback only, no emulator

One run, side by side, against the replay endpoint (benchmarks/replay_endpoint.py,
server in its own process, so the client's CPU is its own), with a fixed
latency per call (20 ms, AWS-like round trips):

1. **Real pacing** (200 ms between GetRecords per shard, Kinesis' 5 calls/s):
   ``drain_stream`` over 16 shards with ``workers=1`` (what every bounded read
   did before: one shard after another) and with the default 16 workers.
   Target: >= 10x.
2. **Pacing off** (``fetch_interval_s=0``): ``drain_stream`` with 16 workers
   against a plain boto3 GetRecords loop (one shard after another, Limit
   10,000), same data. Target: >= 5x.

Each reader touches every record (``len(data)``). records/s are wall-clock
over the whole read, listing included.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_endpoint import ReplayEndpoint  # noqa: E402

from kinesis_src import AwsSettings, drain_stream  # noqa: E402
from kinesis_src.aws import KinesisClient  # noqa: E402


def drain(url: str, stream: str, workers: int, pacing_s: float, chunk: int = 10_000) -> tuple[int, float, float]:
    kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=url))
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for read in drain_stream(kinesis, stream, fetch_interval_s=pacing_s, workers=workers, chunk_records=chunk):
        for page in read.pages:
            sum(map(len, page.data))
            n += len(page)
    return n, time.perf_counter() - t0, time.process_time() - c0


def boto3_loop(url: str, stream: str) -> tuple[int, float, float]:
    import boto3

    client = boto3.client("kinesis", region_name="us-east-1", endpoint_url=url)
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        it = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            out = client.get_records(ShardIterator=it, Limit=10_000)
            n += len(out["Records"])
            sum(len(r["Data"]) for r in out["Records"])
            if not out["Records"] and out.get("MillisBehindLatest") == 0:
                break
            it = out.get("NextShardIterator")
    return n, time.perf_counter() - t0, time.process_time() - c0


def row(name: str, result: tuple[int, float, float], base: float | None) -> float:
    n, wall, cpu = result
    rate = n / wall
    ratio = f"{rate / base:6.2f}x" if base else "  1.00x"
    print(f"  {name:42s} {n:>9,} rec {wall:7.2f} s {rate:>11,.0f} rec/s  CPU {cpu / n * 1e6:5.1f} us/rec  {ratio}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--paced-records", type=int, default=6_000, help="records per shard, paced part")
    parser.add_argument("--records", type=int, default=50_000, help="records per shard, unpaced part")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    latency = args.latency_ms / 1000
    print(f"1. real pacing (200 ms per shard between calls), {args.shards} shards x {args.paced_records:,} records "
          f"of 200 B, {args.latency_ms:.0f} ms per call, GetRecords Limit 1,000 (chunk_records)")
    with ReplayEndpoint(shards=args.shards, records_per_shard=args.paced_records, latency_s=latency) as ep:
        base = row("drain_stream, workers=1 (before)", drain(ep.endpoint_url, ep.stream_name, 1, 0.2, 1_000), None)
        row("drain_stream, workers=16", drain(ep.endpoint_url, ep.stream_name, 16, 0.2, 1_000), base)
    print(f"\n2. pacing off, {args.shards} shards x {args.records:,} records of 200 B, {args.latency_ms:.0f} ms per call")
    with ReplayEndpoint(shards=args.shards, records_per_shard=args.records, latency_s=latency) as ep:
        base = row("boto3 GetRecords loop (Limit 10,000)", boto3_loop(ep.endpoint_url, ep.stream_name), None)
        row("drain_stream, workers=1", drain(ep.endpoint_url, ep.stream_name, 1, 0.0), base)
        row("drain_stream, workers=16", drain(ep.endpoint_url, ep.stream_name, 16, 0.0), base)


if __name__ == "__main__":
    main()
