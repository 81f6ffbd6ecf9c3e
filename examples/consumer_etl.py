"""Example: an ETL job on the Python consumer, with workers sharing the stream.

    python examples/consumer_etl.py                      # embedded emulators, 2 workers, a split mid-way
    python examples/consumer_etl.py --workers 3 --records 3000
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 python examples/consumer_etl.py   # LocalStack or any endpoint

What it does:
1. creates a 4-shard stream and writes keyed records ("key-07:42" = the 42nd
   record of key-07) in the background;
2. starts ``--workers`` worker processes, each running
   ``async with Consumer(...)`` under the same application name: the lease
   table gives each a fair share of the shards;
3. splits a shard while they run: its children are read only after every
   record of the parent was checkpointed;
4. sends SIGTERM to every worker once all records were seen: each finishes its
   batch, checkpoints, releases its leases and exits;
5. prints who read what, and a per-key order check. Exits 1 if it fails.

Each worker is this loop (see ``worker()`` below; ``Consumer(stream,
application_name=...)`` is the same as passing a ``ConsumerConfig``)::

    async with Consumer(ConsumerConfig(stream, application_name="orders-etl")) as consumer:
        async for batch in consumer:
            for record in batch.records:
                out.write(...)
            await batch.checkpoint()
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from kinesis_src import AwsSettings, Consumer, ConsumerConfig, LeaseTiming, Record
from kinesis_src.aws import KinesisClient
from kinesis_src.testing import KeyedProducer, check_order

HERE = Path(__file__).resolve()
TIMING = LeaseTiming(failover_s=6, renew_interval_s=2, scan_interval_s=0.5)


def etl_config(stream: str, worker_id: str) -> ConsumerConfig:
    """The job's options in one frozen value, checked here: a wrong one fails before anything is read."""
    return ConsumerConfig(
        stream, application_name="orders-etl", worker_id=worker_id, lease_timing=TIMING,
        idle_interval_s=0.25, metrics_interval_s=5,
    )


async def worker(stream: str, worker_id: str) -> None:
    """One worker process: print each processed record as a JSON line, checkpoint every batch."""
    async with Consumer(etl_config(stream, worker_id)) as consumer:
        async for batch in consumer:
            for r in batch.records:
                row = {"t": time.monotonic(), "shard": r.shard_id, "seq": r.sequence_number, "data": r.data.decode()}
                print(json.dumps(row))
            sys.stdout.flush()
            await batch.checkpoint()
        print(json.dumps({"metrics": consumer.metrics.summary()}), flush=True)


def endpoints():
    sys.path.insert(0, str(HERE.parents[1] / "localstack"))
    import launcher  # stdlib only; installs the npm emulators on first use

    return launcher.endpoints_for_demo(dynamodb=True)


class Worker:
    """A worker subprocess and the records it printed."""

    def __init__(self, stream: str, worker_id: str) -> None:
        self.worker_id = worker_id
        self.rows: list[dict] = []
        self.metrics = ""
        self.process = subprocess.Popen(
            [sys.executable, str(HERE), "--worker", worker_id, "--stream", stream],
            stdout=subprocess.PIPE, text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            row = json.loads(line)
            if "metrics" in row:
                self.metrics = row["metrics"]
            else:
                self.rows.append(row)


def run_demo(args: argparse.Namespace) -> int:
    with endpoints():
        kinesis = KinesisClient(AwsSettings.from_env())
        stream = f"orders-{int(time.time())}"
        kinesis.create_stream(stream, 4)
        kinesis.wait_active(stream)
        producer = KeyedProducer(kinesis, stream, keys=20)
        rounds = max(1, args.records // 20)
        workers = [Worker(stream, f"worker-{i}") for i in range(args.workers)]
        try:
            producer.put_rounds(rounds // 2)
            split_one_shard(kinesis, stream)
            producer.put_rounds(rounds - rounds // 2)
            wait_until_seen(workers, producer.acknowledged, timeout_s=120)
            for w in workers:
                w.process.send_signal(signal.SIGTERM)
            codes = [w.process.wait(30) for w in workers]
            for w in workers:
                w.reader.join(5)
        finally:
            for w in workers:
                if w.process.poll() is None:
                    w.process.kill()
        return report(workers, producer.expected(), codes)


def split_one_shard(kinesis: KinesisClient, stream: str) -> None:
    shard = kinesis.list_shards(stream)[0]
    lo, hi = (int(shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    print(f"splitting {shard['ShardId']} while the workers read ...", flush=True)
    kinesis.split_shard(stream, shard["ShardId"], (lo + hi + 1) // 2)
    kinesis.wait_active(stream)


def wait_until_seen(workers: list[Worker], expected: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len({(r["shard"], r["seq"]) for w in workers for r in w.rows}) < expected:
        if time.monotonic() > deadline or any(w.process.poll() is not None for w in workers):
            raise SystemExit(f"workers did not see all {expected} records in {timeout_s:.0f}s")
        time.sleep(0.2)


def report(workers: list[Worker], expected: set[tuple[str, int]], codes: list[int]) -> int:
    per_shard: dict[str, Counter] = defaultdict(Counter)
    for w in workers:
        for r in w.rows:
            per_shard[r["shard"]][w.worker_id] += 1
    print("records per shard, by worker:")
    for shard in sorted(per_shard):
        print(f"  {shard}: " + ", ".join(f"{k} {v}" for k, v in sorted(per_shard[shard].items())))
    for w in workers:
        print(f"  {w.worker_id} exit {w.process.returncode}: {w.metrics}")
    # One machine: CLOCK_MONOTONIC is shared by the workers, so delivery times order all of them.
    delivered = sorted(
        ((r["t"], i, n, r) for i, w in enumerate(workers) for n, r in enumerate(w.rows)), key=lambda x: x[:3]
    )
    records = [Record(*decode_key(r["data"]), r["seq"], 0, r["shard"], None) for *_, r in delivered]
    result = check_order(records, expected)
    print(result.summary())
    return 0 if result.ok and all(c == 0 for c in codes) else 1


def decode_key(data: str) -> tuple[str, bytes]:
    return data.rpartition(":")[0], data.encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=f"{args.worker} %(levelname)s %(message)s")
        asyncio.run(worker(args.stream, args.worker))
        return 0
    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
