"""CPU per GetRecords call at the Consumer's cadence: aiobotocore's path against the direct one (#22).

Four shards polled every 200 ms at their tip (empty pages, as a caught-up Consumer polls), one
process, the replay endpoint (benchmarks/replay_endpoint.py) in its own process; the two paths
interleaved round by round, median of the rounds::

    .venv/bin/python benchmarks/bench_get_records_call.py --seconds 20 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")

from replay_endpoint import ReplayEndpoint  # noqa: E402

from kinesis_src.aws.async_kinesis import AsyncKinesisClient  # noqa: E402
from kinesis_src.config import AwsSettings  # noqa: E402
from kinesis_src.positions import Position  # noqa: E402

SHARDS = 4
PAUSE_S = 0.2


async def poll(kinesis: AsyncKinesisClient, stream: str, shard: str, until: float, calls: list[int]) -> None:
    iterator = await kinesis.get_shard_iterator(stream, shard, Position.parse("latest"))
    while time.monotonic() < until:
        page = await kinesis.get_records(iterator, 10_000, shard, stream)
        iterator = page.next_iterator or iterator
        calls[0] += 1
        await asyncio.sleep(PAUSE_S)


async def one_round(settings: AwsSettings, stream: str, seconds: float) -> tuple[float, int]:
    """(CPU ms per call, calls) of polling every shard for ``seconds``, after a 2 s warm-up."""
    async with AsyncKinesisClient(settings) as kinesis:
        shards = [f"shardId-{i:012d}" for i in range(SHARDS)]
        warm: list[int] = [0]
        await asyncio.gather(*(poll(kinesis, stream, s, time.monotonic() + 2, warm) for s in shards))
        calls = [0]
        before = os.times()
        await asyncio.gather(*(poll(kinesis, stream, s, time.monotonic() + seconds, calls) for s in shards))
        after = os.times()
    cpu = (after.user - before.user) + (after.system - before.system)
    return 1000 * cpu / calls[0], calls[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with ReplayEndpoint(shards=SHARDS, records_per_shard=10) as endpoint:
        base = AwsSettings(region="us-east-1", endpoint_url=endpoint.endpoint_url)
        paths = {"aiobotocore": replace(base, direct_get_records=False), "direct": base}
        results: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, settings in paths.items():
                ms, calls = asyncio.run(one_round(settings, endpoint.stream_name, args.seconds))
                results[name].append(ms)
                print(f"  {name:12s} {ms:.3f} ms CPU per call ({calls} calls)", flush=True)
    medians = {name: statistics.median(values) for name, values in results.items()}
    per_minute = 60 * SHARDS / PAUSE_S / 1000
    print(f"\n{'path':12s} {'CPU ms/call':>12s} {'CPU s/min':>10s}  ({SHARDS} shards, a call every {PAUSE_S * 1000:.0f} ms each)")
    for name, ms in medians.items():
        print(f"{name:12s} {ms:12.3f} {ms * per_minute:10.2f}")
    print(f"\ndirect / aiobotocore: {medians['direct'] / medians['aiobotocore']:.2f}x the CPU per call")


if __name__ == "__main__":
    main()
