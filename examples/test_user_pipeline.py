"""Example: testing your own Kinesis pipeline with the kinesis_src.testing pytest plugin.

The pipeline under test is ``export_orders`` below: a Consumer job that writes
one JSON line per order to a file and checkpoints after each batch is
written. The tests put keyed-counter records (``b"key-007:42"`` is the 42nd
order of key-007), split and merge shards while they do, run the pipeline,
and hand what landed in *its* sink to ``verify_delivery``, which fails with a
readable report if any order is missing, duplicated or out of order.

Run it from a kinesis-src checkout (the plugin starts the embedded emulators)::

    python localstack/launcher.py isolated -- python -m pytest examples/test_user_pipeline.py

or against LocalStack or any other endpoint (nothing is started)::

    AWS_ENDPOINT_URL=http://127.0.0.1:4566 python -m pytest examples/test_user_pipeline.py

The fixtures (``kinesis_stream_factory``, ``kinesis_resharder``,
``kinesis_keyed_producer``, ``kinesis_test_env``) need no conftest.py: the
plugin registers them when kinesis-src is installed. See docs/testing.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kinesis_src import Consumer
from kinesis_src.testing import KeyedProducer, Resharder, StreamFactory, verify_delivery

# -- the pipeline under test (in real life it lives in your package) ----------------------


async def export_orders(consumer: Consumer, out: TextIO) -> int:
    """Write each order as a JSON line; checkpoint a batch only after it is flushed (at least once)."""
    written = 0
    async for batch in consumer:
        for record in batch.records:
            customer, _, number = record.data.decode().rpartition(":")
            out.write(json.dumps({"customer": customer, "order": int(number), "shard": record.shard_id}) + "\n")
            written += 1
        out.flush()
        await batch.checkpoint()
    return written


# -- helpers of the test -------------------------------------------------------------------


def lines_in(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def run_export_until(stream: str, out_path: Path, enough: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Run the pipeline until ``enough()`` holds (polled, with a deadline), then stop it gracefully."""
    async with Consumer(stream, application_name=stream, idle_interval_s=0.1, handle_signals=False) as consumer:
        with out_path.open("a") as out:
            job = asyncio.create_task(export_orders(consumer, out))
            deadline = time.monotonic() + timeout_s
            while not enough():
                if job.done():
                    job.result()  # the pipeline failed: raise its error
                    raise AssertionError("the pipeline ended before writing every order")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the pipeline wrote {lines_in(out_path)} lines in {timeout_s:.0f}s")
                await asyncio.sleep(0.05)
            consumer.stop()  # ends the iteration after the current batch
            await asyncio.wait_for(job, timeout_s)


def exported(out_path: Path) -> list[tuple[str, int]]:
    """What the sink holds, as the verifier's (key, counter) pairs, in the order written."""
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    return [(row["customer"], row["order"]) for row in rows]


# -- the tests -----------------------------------------------------------------------------


def test_every_customers_orders_arrive_once_and_in_order_through_a_split_and_a_merge(
    kinesis_stream_factory: StreamFactory,
    kinesis_resharder: Resharder,
    kinesis_keyed_producer: Callable[..., KeyedProducer],
    kinesis_test_env: dict[str, str],
    tmp_path: Path,
) -> None:
    stream = kinesis_stream_factory(shards=2)
    orders = kinesis_keyed_producer(stream, keys=20)
    orders.put_rounds(3)
    split = kinesis_resharder.split(stream, "shardId-000000000000")  # at its middle hash key
    orders.put_rounds(3)
    kinesis_resharder.merge(stream, split.children[1], "shardId-000000000001")  # upper child + neighbour
    orders.put_rounds(3)

    out_path = tmp_path / "orders.jsonl"
    asyncio.run(run_export_until(stream, out_path, lambda: lines_in(out_path) >= orders.acknowledged))

    verify_delivery(exported(out_path), orders, "exactly_once")  # raises with a report on any problem


def test_a_restarted_export_resumes_from_its_checkpoints(
    kinesis_stream_factory: StreamFactory,
    kinesis_resharder: Resharder,
    kinesis_keyed_producer: Callable[..., KeyedProducer],
    kinesis_test_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """Stop the job half way, reshard at random (seed 3), restart it: nothing lost, order kept.

    A restart may redeliver what was written but not yet checkpointed, so
    the contract checked here is at least once.
    """
    stream = kinesis_stream_factory(shards=2)
    orders = kinesis_keyed_producer(stream, keys=10)
    orders.put_rounds(4)
    out_path = tmp_path / "orders.jsonl"
    asyncio.run(run_export_until(stream, out_path, lambda: lines_in(out_path) >= 20))

    steps = kinesis_resharder.random_reshards(stream, seed=3, steps=3, max_shards=4,
                                              between=lambda step: orders.put_rounds(2))
    asyncio.run(run_export_until(stream, out_path, lambda: len(set(exported(out_path))) >= orders.acknowledged))

    report = verify_delivery(exported(out_path), orders, "at_least_once")
    print(f"reshards: {', '.join(map(str, steps))}\n{report}")
