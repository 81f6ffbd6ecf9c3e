"""Demo: read a Kinesis stream in lineage order while it is split and merged.

    python examples/reshard_demo.py            # starts the embedded emulators itself
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 python examples/reshard_demo.py   # any endpoint

What it does:
1. creates a 2-shard stream and starts a producer that writes keyed records
   ("key-007:42" = the 42nd record of key-007) in the background;
2. while the producer runs, splits shard 0 in two, then merges one of the
   new children with shard 1 -- every key moves to a new shard at least once;
3. stops the producer and reads the whole stream back with
   ``kinesis_src.drain_stream``: each parent is read to SHARD_END before any
   of its children start;
4. prints the shard lineage, what was read from each shard, and a per-key
   order check (no key's counter may go backwards across a parent -> child
   boundary; nothing missing, nothing duplicated). Exits 1 if the check fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

from kinesis_src import AwsSettings, drain_stream
from kinesis_src.aws import KinesisClient
from kinesis_src.discovery import ShardDiscovery
from kinesis_src.testing import KeyedProducer, check_order

HASH_MAX = 2**128 - 1


def endpoints():
    """The environment's endpoints, or the embedded emulators (localstack/launcher.py) while the demo runs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "localstack"))
    import launcher  # stdlib only; installs the npm emulators on first use

    return launcher.endpoints_for_demo(dynamodb=False)


def reshard_while_producing(kinesis: KinesisClient, stream: str, producer: KeyedProducer, rounds: int) -> None:
    """Split shard 0, then merge its upper child with shard 1, with the producer running throughout."""
    worker = threading.Thread(target=producer.run_until_stopped, args=(rounds,), daemon=True)
    producer.put_rounds(5)
    worker.start()
    try:
        shards = {s["ShardId"]: s for s in kinesis.list_shards(stream)}
        first, second = sorted(shards)
        lo, hi = (int(shards[first]["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
        print(f"splitting {first} at the middle of its hash range ...", flush=True)
        kinesis.split_shard(stream, first, (lo + hi + 1) // 2)
        kinesis.wait_active(stream)
        _wait_for_rounds(producer, 5)
        discovery = ShardDiscovery(kinesis, stream)
        discovery.refresh()
        upper_child = max(discovery.graph.children(first))
        print(f"merging {upper_child} with {second} ...", flush=True)
        kinesis.merge_shards(stream, upper_child, second)
        kinesis.wait_active(stream)
        _wait_for_rounds(producer, 5)
    finally:
        producer.stop()
        worker.join(timeout=60)
    producer.put_rounds(3)


def _wait_for_rounds(producer: KeyedProducer, rounds: int, timeout_s: float = 60) -> None:
    """Let the background producer write a few more rounds into the new shards."""
    target = producer.acknowledged + rounds * producer.keys
    deadline = time.monotonic() + timeout_s
    while producer.acknowledged < target and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description="Read a stream in lineage order through a split and a merge.")
    parser.add_argument("--stream", default=f"demo-orders-{int(time.time())}")
    parser.add_argument("--keys", type=int, default=50, help="partition keys (default 50)")
    parser.add_argument("--rounds", type=int, default=40, help="max background producer rounds (one record per key each)")
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    with endpoints():
        settings = AwsSettings.from_env(region=os.environ.get("AWS_REGION") or "us-east-1")
        kinesis = KinesisClient(settings)
        print(f"creating stream {opts.stream!r} with 2 shards at {kinesis.endpoint} ...", flush=True)
        kinesis.create_stream(opts.stream, 2)
        kinesis.wait_active(opts.stream)
        producer = KeyedProducer(kinesis, opts.stream, keys=opts.keys)
        reshard_while_producing(kinesis, opts.stream, producer, opts.rounds)
        print(f"produced {producer.acknowledged} records over {opts.keys} keys; reading back in lineage order:")

        records = []
        for chunk in drain_stream(kinesis, opts.stream, fetch_interval_s=0.0):
            records.extend(chunk.records())
            if chunk.stop_reason.value in ("shard_end", "caught_up"):
                print(f"  {chunk.shard_id}: {chunk.stop_reason.value:<9} after {chunk.next_position}")
        discovery = ShardDiscovery(kinesis, opts.stream)
        discovery.refresh()
        graph = discovery.graph
        report = check_order(records, producer.expected())

        print("\nshard lineage (parents -> shard: records read):")
        for shard_id in graph.shard_ids():
            parents = " + ".join(graph.parents(shard_id)) or "(root)"
            state = "open" if graph.is_open(shard_id) else "closed"
            print(f"  {parents:>44} -> {shard_id} [{state}]: {report.shards.get(shard_id, 0)}")
        print()
        print(report.summary())
        kinesis.delete_stream(opts.stream)
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
