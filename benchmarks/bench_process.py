"""Benchmark: per-record parallel processing (``process()``) against today's shard-ordered loop.

Run inside the isolated namespace (it starts its own emulators)::

    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/bench_process.py

A 2-shard kinesis-mock stream holds ``--rounds`` rounds of one record per
key for ``--keys`` (40) keys (data ``b"<key>:<n>"``). Every reader uses the
same handler: ``await asyncio.sleep(0.05)`` per record (a stand-in for an
HTTP or LLM call), and records the key's counter, so per-key order is
checked for every run. Each run is a fresh application (fresh leases) from
TRIM_HORIZON, in one process, side by side:

* ``loop``: today's shard-ordered loop, ``async for batch in consumer:``,
  each record handled in turn, ``await batch.checkpoint()`` per batch;
* ``process shard``: ``process(ordering="shard")``, one record per shard in
  flight (the loop's guarantee; the two shards overlap);
* ``process key``: ``process(ordering="key", max_in_flight=64)``: one record
  per key in flight, 40 keys;
* ``process unordered``: ``process(ordering="unordered", max_in_flight=64)``.

records/s is counted from the first handler call to the N-th record done
(N = ``--loop-records`` for the two one-at-a-time readers, which would take
minutes for the whole stream, and every record for the others). The ratio
column is against ``loop``. The issue's target: "key" > 20x the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "localstack"))

from kinesis_src import Consumer, LeaseTiming
from kinesis_src.aws import KinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.consumer.processing import DeliveredRecord, process
from kinesis_src.testing import KeyedProducer, decode

HANDLER_S = 0.05
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)


@dataclass
class Run:
    label: str
    records: int
    seconds: float
    in_order: bool
    peak_in_flight: int

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("nan")


class Probe:
    """The shared handler's bookkeeping: per-key order, concurrency, and when to stop."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.seen: dict[str, list[int]] = defaultdict(list)
        self.done = 0
        self.first: float | None = None
        self.last = 0.0
        self.running = 0
        self.peak = 0
        self.finished = asyncio.Event()

    async def handle(self, data: bytes) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        key, n = decode(data)
        self.seen[key].append(n)
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(HANDLER_S)
        self.running -= 1
        self.done += 1
        if self.done == self.target:
            self.last = time.perf_counter()
            self.finished.set()

    def result(self, label: str) -> Run:
        in_order = all(ns == sorted(ns) for ns in self.seen.values())
        return Run(label, self.target, self.last - (self.first or self.last), in_order, self.peak)


def new_consumer(stream: str) -> Consumer:
    return Consumer(stream, application_name=f"bench-process-{uuid.uuid4().hex[:8]}", lease_timing=TIMING,
                    idle_interval_s=0.1, handle_signals=False, initial_position="trim_horizon")


async def loop_run(stream: str, target: int) -> Run:
    probe = Probe(target)
    async with new_consumer(stream) as consumer:
        async for batch in consumer:
            for record in batch.records:
                await probe.handle(record.data)
                if probe.finished.is_set():
                    break
            if probe.finished.is_set():
                break
            await batch.checkpoint()
    return probe.result("loop (shard-ordered)")


async def process_run(stream: str, target: int, ordering: str, max_in_flight: int) -> Run:
    probe = Probe(target)

    async def handler(record: DeliveredRecord) -> None:
        await probe.handle(record.data)

    async with new_consumer(stream) as consumer:
        task = asyncio.create_task(process(consumer, handler, ordering=ordering, max_in_flight=max_in_flight))
        await probe.finished.wait()
        consumer.stop()
        await task
    return probe.result(f"process {ordering} (max_in_flight={max_in_flight})")


async def bench(opts: argparse.Namespace, stream: str) -> list[Run]:
    total = opts.keys * opts.rounds
    runs = [await loop_run(stream, opts.loop_records)]
    runs.append(await process_run(stream, opts.loop_records, "shard", 64))
    runs.append(await process_run(stream, total, "key", opts.max_in_flight))
    runs.append(await process_run(stream, total, "unordered", opts.max_in_flight))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=50, help="records per key (40 x 50 = 2,000 records)")
    parser.add_argument("--loop-records", type=int, default=200, help="records the one-at-a-time readers handle")
    parser.add_argument("--max-in-flight", type=int, default=64)
    opts = parser.parse_args()

    import launcher

    with launcher.Emulators(kinesis=True, dynamodb=True) as emulators:
        os.environ.update(emulators.env())
        kinesis = KinesisClient(AwsSettings.from_env())
        stream = f"bench-process-{uuid.uuid4().hex[:6]}"
        kinesis.create_stream(stream, 2)
        kinesis.wait_active(stream)
        KeyedProducer(kinesis, stream, keys=opts.keys).put_rounds(opts.rounds)
        print(f"stream {stream}: 2 shards, {opts.keys} keys x {opts.rounds} records; handler sleeps "
              f"{HANDLER_S * 1000:.0f} ms per record\n", flush=True)
        runs = asyncio.run(bench(opts, stream))
    base = runs[0].rate
    print(f"{'reader':44} {'records':>8} {'seconds':>8} {'rec/s':>8} {'x loop':>7} {'peak':>5}  per-key order")
    for run in runs:
        print(f"{run.label:44} {run.records:8d} {run.seconds:8.2f} {run.rate:8.1f} {run.rate / base:7.1f} "
              f"{run.peak_in_flight:5d}  {'kept' if run.in_order else 'BROKEN'}")


if __name__ == "__main__":
    main()
