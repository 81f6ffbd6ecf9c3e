"""Read a preloaded stream with the ``async-kinesis`` PyPI package; print one JSON line.

Run by ``bench_consumer.py`` with the Python of a separate virtualenv that has
``async-kinesis[dynamodb]`` installed (it pins its own aiobotocore/botocore,
so it must never go into the project's .venv). It does not import kinesis_src.

Configuration, chosen so the comparison with kinesis-src's Consumer is fair:

* ``processor=RawProcessor()``: the record bytes as they are. The default
  ``JsonProcessor`` would ``json.loads`` every record (and fail on the random
  payload); ``StringProcessor`` would UTF-8 decode it.
* ``checkpointer=DynamoDBCheckPointer(...)`` on DynamoDB Local: shard
  ownership and a checkpoint per GetRecords batch in DynamoDB, as
  kinesis-src does with its lease table. (async-kinesis checkpoints a batch
  implicitly when the application asks for the item after the batch.)
* ``shard_fetch_rate=5``: Kinesis' 5 GetRecords calls/s per shard (the
  package's default is 1 call/s per shard). ``record_limit=10000``.
* ``sleep_time_no_records=0.05`` (default 2 s) and ``idle_timeout=60`` (the
  iteration would otherwise end after 2 s without records).
* ``use_list_shards=True``: shards from ListShards (what AWS recommends, and
  what kinesis-src uses), not DescribeStream, which the replay endpoint
  (benchmarks/replay_endpoint.py) does not answer.

Usage: python async_kinesis_driver.py --endpoint URL --dynamodb URL --stream S --expect N
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
import uuid


async def run(args: argparse.Namespace) -> dict:
    from kinesis import Consumer
    from kinesis.aggregators import SimpleAggregator
    from kinesis.dynamodb import DynamoDBCheckPointer
    from kinesis.processors import Processor

    class RawProcessor(Processor, SimpleAggregator):
        """No deserialization: every record's Data bytes are one item."""

        def serialize(self, item):
            return item

        def deserialize(self, data):
            return data

    checkpointer = DynamoDBCheckPointer(
        name=f"bench-{uuid.uuid4().hex[:8]}",
        endpoint_url=args.dynamodb,
        region_name="us-east-1",
        create_table=True,
    )
    consumer = Consumer(
        args.stream,
        endpoint_url=args.endpoint,
        region_name="us-east-1",
        processor=RawProcessor(),
        checkpointer=checkpointer,
        iterator_type="TRIM_HORIZON",
        record_limit=10000,
        shard_fetch_rate=5,
        sleep_time_no_records=0.05,
        idle_timeout=60,
        use_list_shards=True,
    )
    started = time.perf_counter()
    records = nbytes = 0
    async with consumer:
        t0, c0 = time.perf_counter(), time.process_time()
        first = None
        async for item in consumer:
            if first is None:
                first = time.perf_counter() - t0
            records += 1
            nbytes += len(item)
            if records >= args.expect:
                break
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "method": "async-kinesis",
        "records": records,
        "bytes": nbytes,
        "seconds": seconds,
        "cpu_s": cpu,
        "start_s": t0 - started,
        "first_record_s": first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--dynamodb", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--expect", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from importlib.metadata import version

    result = asyncio.run(run(args))
    result["version"] = {p: version(p) for p in ("async-kinesis", "aiobotocore", "botocore")}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
