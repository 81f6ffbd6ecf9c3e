"""Example: slow per-record work (an HTTP or LLM call) on many records of a shard at once, with a dead letter.

    python examples/parallel_processing.py                 # embedded emulators (kinesis-mock, DynamoDB Local)
    python examples/parallel_processing.py --records 2000 --ordering unordered
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 python examples/parallel_processing.py   # LocalStack or any endpoint

What it does:
1. creates a 2-shard stream "orders" and its dead letter stream "orders-dlq",
   and writes ``--records`` keyed records ("key-007:42" = the 42nd record of key-007);
2. processes them with ``process()``: a handler that "calls a service" (sleeps
   50 ms), up to 64 records in flight, one per key ("key" ordering); every
   record of key-013 whose counter is a multiple of 10 is unparseable
   (``Reject``: dead-lettered at once) and one in 20 of key-005's fails the
   first time (retried);
3. stops once every record is done, then prints the metrics, what reached the
   dead letter stream, and a per-key order check. Exits 1 if a check fails.

The heart of it (see ``process_orders`` below)::

    async with Consumer("orders", application_name="orders-enricher") as consumer:
        await consumer.process(handle, ordering="key", max_in_flight=64,
                               max_delivery_attempts=5, dead_letter="orders-dlq")
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinesis_src import AwsSettings, Consumer, read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.consumer.processing import DeliveredRecord, Reject, process
from kinesis_src.testing import KeyedProducer, decode

HERE = Path(__file__).resolve()


def endpoints():
    sys.path.insert(0, str(HERE.parents[1] / "localstack"))
    import launcher  # stdlib only; installs the npm emulators on first use

    return launcher.endpoints_for_demo(dynamodb=True)


async def process_orders(stream: str, dlq: str, expected: int, ordering: str) -> dict[str, list[int]]:
    """Process every record once; returns each key's counters in the order they were accepted."""
    accepted: dict[str, list[int]] = defaultdict(list)
    finished = 0
    consumer = Consumer(stream, application_name=f"orders-enricher-{uuid.uuid4().hex[:6]}",
                        initial_position="trim_horizon", idle_interval_s=0.2, handle_signals=False)

    async def handle(record: DeliveredRecord) -> None:
        nonlocal finished
        key, n = decode(record.data)
        try:
            if key == "key-013" and n % 10 == 0:
                raise Reject(f"order {key}:{n} cannot be parsed")
            if key == "key-005" and n % 20 == 0 and record.delivery_count == 1:
                raise ConnectionError("the enrichment service hung up")  # retried with backoff
            await asyncio.sleep(0.05)  # the slow call
            accepted[key].append(n)
        finally:
            if key != "key-005" or n % 20 or record.delivery_count > 1:
                finished += 1  # this record's last delivery ended
                if finished == expected:
                    consumer.stop()

    async with consumer:
        # With the lead's Consumer.process this is: await consumer.process(handle, ...)
        metrics = await process(consumer, handle, ordering=ordering, max_in_flight=64,
                                max_delivery_attempts=5, dead_letter=dlq)
    print(metrics.summary())
    return accepted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--ordering", default="key", choices=["key", "unordered", "shard"])
    args = parser.parse_args()
    with endpoints():
        kinesis = KinesisClient(AwsSettings.from_env())
        stream = f"orders-{uuid.uuid4().hex[:6]}"
        dlq = f"{stream}-dlq"
        for name, shards in ((stream, 2), (dlq, 1)):
            kinesis.create_stream(name, shards)
            kinesis.wait_active(name)
        producer = KeyedProducer(kinesis, stream, keys=20)
        producer.put_rounds(max(1, args.records // 20))
        expected = len(producer.expected())
        began = time.perf_counter()
        accepted = asyncio.run(process_orders(stream, dlq, expected, args.ordering))
        took = time.perf_counter() - began
        letters = [json.loads(d) for d in read_table(dlq, kinesis=kinesis, progress=False).column("data").to_pylist()]

    rejected = {decode(base64.b64decode(d["data"])) for d in letters}
    should_reject = {(k, n) for k, n in producer.expected() if k == "key-013" and n % 10 == 0}
    done = {(k, n) for k, ns in accepted.items() for n in ns} | rejected
    in_order = all(ns == sorted(ns) for ns in accepted.values())
    print(f"{expected} records in {took:.1f}s ({expected / took:.0f} records/s with a 50 ms handler)")
    print(f"dead letters      {len(letters)} (outcomes: {sorted({d['outcome'] for d in letters})})")
    print(f"missing           {len(producer.expected() - done)}")
    print(f"per-key order check: {'OK' if in_order or args.ordering == 'unordered' else 'FAILED'}")
    ok = rejected == should_reject and done == producer.expected() and (in_order or args.ordering == "unordered")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
