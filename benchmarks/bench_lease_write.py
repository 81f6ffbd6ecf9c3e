"""Benchmark: CPU of one checkpoint write, on a worker thread (sync client) and on the event loop (async).

Run inside the isolated namespace, with DynamoDB Local::

    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python localstack/launcher.py run \
        --no-kinesis -- .venv/bin/python benchmarks/bench_lease_write.py

Both sides write the same fenced checkpoint of one held lease through
``LeaseCoordinator``-free calls of the lease table: ``asyncio.to_thread``
of ``LeaseTable.checkpoint`` (the Consumer's path before #25's async
writes, and its path under moto) against ``await LeaseTable.acheckpoint``
on an ``AsyncDynamoDBClient``. Rounds alternate; CPU is this process's
(DynamoDB Local runs apart). Prints each round and the ratio async/thread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
import uuid

from kinesis_src.aws.async_dynamodb import AsyncDynamoDBClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.config import AwsSettings
from kinesis_src.leases.model import Checkpoint, Lease
from kinesis_src.leases.table import LeaseTable
from lineage import MAX_HASH_KEY, HashRange

SEQUENCE = "49590338271490256608559692538361571095921575989136588898"


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def held(table: LeaseTable, shard_id: str) -> Lease:
    table.create_lease(Lease(shard_id, Checkpoint.trim_horizon(), HashRange(0, MAX_HASH_KEY)))
    taken = table.take_lease(table.get_lease(shard_id), "bench")  # type: ignore[arg-type]
    assert taken is not None
    return taken


async def on_thread(table: LeaseTable, lease: Lease, writes: int) -> tuple[float, float]:
    began, wall = cpu_s(), time.perf_counter()
    for i in range(writes):
        await asyncio.to_thread(table.checkpoint, lease, Checkpoint.sequence(SEQUENCE, i))
    return cpu_s() - began, time.perf_counter() - wall


async def on_loop(table: LeaseTable, client: AsyncDynamoDBClient, lease: Lease, writes: int) -> tuple[float, float]:
    began, wall = cpu_s(), time.perf_counter()
    for i in range(writes):
        await table.acheckpoint(client, lease, Checkpoint.sequence(SEQUENCE, i))
    return cpu_s() - began, time.perf_counter() - wall


async def main(writes: int, rounds: int) -> None:
    settings = AwsSettings.from_env()
    table = LeaseTable(DynamoDBClient(settings), f"bench-writes-{uuid.uuid4().hex[:6]}", "bench", "stream")
    table.ensure_table()
    threaded, looped = held(table, "shard-thread"), held(table, "shard-loop")
    async with AsyncDynamoDBClient(settings) as client:
        await on_thread(table, threaded, 20)  # warm both clients
        await on_loop(table, client, looped, 20)
        ratios = []
        for n in range(rounds):
            (t_cpu, t_wall), (l_cpu, l_wall) = await on_thread(table, threaded, writes), await on_loop(
                table, client, looped, writes)
            ratios.append(l_cpu / t_cpu)
            print(f"round {n}: thread {t_cpu / writes * 1e3:.2f} ms CPU/write ({t_wall / writes * 1e3:.2f} ms wall); "
                  f"loop {l_cpu / writes * 1e3:.2f} ms CPU/write ({l_wall / writes * 1e3:.2f} ms wall); "
                  f"loop/thread {ratios[-1]:.2f}x", flush=True)
    print(f"median loop/thread CPU: {sorted(ratios)[len(ratios) // 2]:.2f}x over {rounds} rounds of {writes} writes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    asyncio.run(main(opts.writes, opts.rounds))
