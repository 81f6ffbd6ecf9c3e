"""Example: sticky key ranges over two streams, so each key's events always reach the same worker.

    python examples/key_range_workers.py                  # embedded emulators, 3 workers
    python examples/key_range_workers.py --workers 4 --keys 60
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 python examples/key_range_workers.py   # any endpoint

What it does:
1. creates two streams, "orders" (2 shards) and "payments" (1 shard), and puts
   keyed records ("key-07:42" = the 42nd record of key-07) in both;
2. runs ``--workers`` consumers, worker i with ``key_range=KeyRange.slice(i, n)``
   and both streams: ``Consumer([orders, payments], key_range=...)``. A key's
   hash is the same in every stream, so a key's orders *and* payments reach
   the same worker: local state per key (a join, a running total) stays
   correct with no shuffle;
3. splits an orders shard while they read: the slices do not move, so no
   key changes worker;
4. stops once every record was seen, and checks that every record was
   delivered once and every key by one worker only. Exits 1 if not.

Here the workers are tasks of one process for brevity; in production each
is its own process (or host) with the same ``application_name`` and its own
slice. Each worker is this loop (see ``worker()`` below)::

    async with Consumer([orders, payments], application_name="orders-by-key",
                        key_range=KeyRange.slice(i, n)) as consumer:
        async for batch in consumer:
            for record in batch.records:      # record.stream: "orders" or "payments"
                state[record.partition_key].update(record)
            await batch.checkpoint()

A worker *without* ``key_range`` may join the same application: it reads
whatever no slice claims (here nothing, once all n slices run), and a slice
that joins later takes its keys over at the shards' checkpoints
(docs/consumer.md, "Workers with and without a range together").

The cost, stated in docs/consumer.md ("Sticky key ranges"): a shard that
straddles k slices is read k times, and with polling those k readers share
the shard's 5 GetRecords calls/s, so ``idle_interval_s`` here is 0.2 × k.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from kinesis_src import AwsSettings, Consumer, KeyRange, LeaseTiming
from kinesis_src.aws import KinesisClient
from kinesis_src.testing import KeyedProducer, decode

HERE = Path(__file__).resolve()
TIMING = LeaseTiming(failover_s=6, renew_interval_s=2, scan_interval_s=0.5)
Seen = dict[str, list[tuple[str, str, int]]]  # worker -> (stream, key, counter)


async def worker(streams: list[str], index: int, count: int, seen: Seen, stop: asyncio.Event) -> None:
    name = f"slice-{index}-of-{count}"
    async with Consumer(
        streams, application_name="orders-by-key", worker_id=name, key_range=KeyRange.slice(index, count),
        lease_timing=TIMING, idle_interval_s=0.2 * count, handle_signals=False,
    ) as consumer:
        stopper = asyncio.create_task(stop_when_set(consumer, stop))
        async for batch in consumer:  # ends after the current batch once consumer.stop() is called
            for record in batch.records:
                key, n = decode(record.data)
                seen[name].append((record.stream, key, n))
            await batch.checkpoint()
        await stopper
        print(f"{name}: {consumer.metrics.summary()}; {consumer.metrics.records_filtered} records of other slices skipped")


async def stop_when_set(consumer: Consumer, stop: asyncio.Event) -> None:
    await stop.wait()
    consumer.stop()


def split_one_shard(kinesis: KinesisClient, stream: str) -> None:
    shard = kinesis.list_shards(stream)[0]
    lo, hi = (int(shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    print(f"splitting {stream}/{shard['ShardId']} while the workers read ...", flush=True)
    kinesis.split_shard(stream, shard["ShardId"], (lo + hi + 1) // 2)
    kinesis.wait_active(stream)


async def run_demo(args: argparse.Namespace) -> int:
    kinesis = KinesisClient(AwsSettings.from_env())
    suffix = int(time.time())
    streams = [f"orders-{suffix}", f"payments-{suffix}"]
    for stream, shards in zip(streams, (2, 1)):
        kinesis.create_stream(stream, shards)
        kinesis.wait_active(stream)
    producers = [KeyedProducer(kinesis, stream, keys=args.keys) for stream in streams]
    expected = lambda: {(p.stream, k, n) for p in producers for k, n in p.expected()}
    seen: Seen = defaultdict(list)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker(streams, i, args.workers, seen, stop)) for i in range(args.workers)]

    def produce() -> None:
        for p in producers:
            p.put_rounds(2)
        split_one_shard(kinesis, streams[0])
        for p in producers:
            p.put_rounds(2)

    await asyncio.to_thread(produce)
    deadline = time.monotonic() + 120
    while not expected() <= {r for rows in seen.values() for r in rows}:
        if time.monotonic() > deadline or any(t.done() for t in tasks):
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            print("the workers did not deliver every record in time")
            return 1
        await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*tasks)
    return report(seen, expected())


def report(seen: Seen, expected: set[tuple[str, str, int]]) -> int:
    copies = Counter(r for rows in seen.values() for r in rows)
    workers_of: dict[str, set[str]] = defaultdict(set)
    for name, rows in seen.items():
        for _, key, _ in rows:
            workers_of[key].add(name)
    for name in sorted(seen):
        keys = {key for _, key, _ in seen[name]}
        print(f"  {name}: {len(seen[name])} records, {len(keys)} keys")
    twice = [r for r, c in copies.items() if c > 1]
    shared = [k for k, w in workers_of.items() if len(w) > 1]
    ok = set(copies) == expected and not twice and not shared
    print(f"{len(expected)} records put, {len(copies)} delivered, {len(twice)} twice; "
          f"{len(shared)} keys seen by more than one worker -> {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--keys", type=int, default=30)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parents[1] / "localstack"))
    import launcher  # stdlib only; installs the npm emulators on first use

    with launcher.endpoints_for_demo(dynamodb=True):
        return asyncio.run(run_demo(args))


if __name__ == "__main__":
    sys.exit(main())
