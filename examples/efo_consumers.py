"""Example: two applications on one stream over enhanced fan-out, each with its own 2 MB/s per shard.

    python localstack/launcher.py isolated -- python examples/efo_consumers.py   # starts LocalStack + DynamoDB Local
    KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566 KINESIS_SRC_DYNAMODB_ENDPOINT_URL=... python examples/efo_consumers.py

(``make demo-efo`` runs the first line.) What it does:
1. creates a 2-shard stream and writes keyed records ("key-07:42" = the 42nd
   record of key-07), splits a shard, writes more;
2. runs two applications at once, "billing" and "audit", each a
   ``Consumer(..., consumer_mode="efo")``: each registers its own stream
   consumer (named after the application) and reads every shard over
   SubscribeToShard, parents before children, checkpointing every batch;
3. lists the stream's consumers while they run, then closes both with
   ``require_consumer_deregistration=True``, which deregisters them;
4. checks, per application, that every record came exactly once and in
   per-key order. Exits 1 if a check fails.

Enhanced fan-out needs real Kinesis or LocalStack (kinesis-mock and
kinesalite cannot serve SubscribeToShard); the lease table is DynamoDB
Local here. See docs/efo.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from kinesis_src import AwsSettings, Consumer, LeaseTiming, Record, RetryPolicy
from kinesis_src.aws import FanOut, KinesisClient
from kinesis_src.testing import LOADED_READ_TIMEOUT_S, LOADED_RETRY, IdempotentKinesisClient, KeyedProducer, check_order

HERE = Path(__file__).resolve()
TIMING = LeaseTiming(failover_s=6, renew_interval_s=2, scan_interval_s=0.5)
APPLICATIONS = ("billing", "audit")
QUIET_S = 15.0  # no batch for this long after every record was seen: done
# LocalStack (host mode) can leave its answers unsent until the subscriptions a closing Consumer
# had open reach their 5-minute limit (seen in CI: DeregisterStreamConsumer handled, its answer
# sent ~300 s later). Deregistration at close waits that out instead of failing the example.
CLOSE_RETRY = RetryPolicy(max_attempts=30, initial_backoff_s=0.05, max_backoff_s=2.0, deadline_s=420.0)


@contextlib.contextmanager
def endpoints() -> Iterator[None]:
    """The environment's endpoints, else LocalStack (Kinesis) and DynamoDB Local, started here."""
    if os.environ.get("KINESIS_SRC_ENDPOINT_URL"):
        yield
        return
    sys.path.insert(0, str(HERE.parents[1] / "localstack"))
    import launcher  # noqa: PLC0415  (stdlib only)
    import localstack_host  # noqa: PLC0415

    if not localstack_host.is_installed():
        raise SystemExit("LocalStack is not installed: run `make setup` (needs Python 3.13), then try again")
    print("starting LocalStack (Kinesis) and DynamoDB Local ...", flush=True)
    with launcher.Emulators(kinesis=False, dynamodb=True) as dynamodb, localstack_host.LocalStack() as localstack:
        os.environ.update(dynamodb.env())
        os.environ["KINESIS_SRC_ENDPOINT_URL"] = localstack.endpoint
        os.environ["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"] = dynamodb.dynamodb_endpoint
        yield


def admin_client() -> KinesisClient:
    """The client that creates and splits the stream: patient with a busy local LocalStack, and whose
    CreateStream takes "already exists" after its own unanswered attempt as done (kinesis_src.testing)."""
    return IdempotentKinesisClient(AwsSettings.from_env(read_timeout_s=LOADED_READ_TIMEOUT_S, retry=LOADED_RETRY))


async def application(name: str, stream: str, expected: int) -> list[Record]:
    """One application: read over EFO until every record came, checkpoint each batch, deregister at close."""
    records: list[Record] = []
    async with Consumer(
        stream, application_name=name, consumer_mode="efo", require_consumer_deregistration=True,
        lease_timing=TIMING, handle_signals=False, metrics_interval_s=5,
        retry=CLOSE_RETRY,
    ) as consumer:
        while len({(r.shard_id, r.sequence_number) for r in records}) < expected:
            try:
                batch = await asyncio.wait_for(consumer.__anext__(), QUIET_S)
            except TimeoutError:
                break
            records.extend(batch.records)
            await batch.checkpoint()
    return records


async def run_both(kinesis: KinesisClient, stream: str, expected: int) -> dict[str, list[Record]]:
    tasks = {name: asyncio.create_task(application(name, stream, expected)) for name in APPLICATIONS}
    arn = kinesis.describe_stream(stream).arn
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # both register at start: show them once they are there
        names = sorted(c.name for c in await asyncio.to_thread(FanOut(kinesis).list_consumers, arn))
        if len(names) == len(APPLICATIONS) or any(t.done() for t in tasks.values()):
            break
        await asyncio.sleep(0.5)
    print(f"stream consumers while reading: {names}", flush=True)
    return {name: await task for name, task in tasks.items()}


def main() -> int:
    with endpoints():
        kinesis = admin_client()
        stream = f"orders-efo-{int(time.time())}"
        kinesis.create_stream(stream, 2)
        kinesis.wait_active(stream)
        producer = KeyedProducer(kinesis, stream, keys=20)
        producer.put_rounds(10)
        parent = kinesis.list_shards(stream)[0]["ShardId"]
        print(f"splitting {parent} ...", flush=True)
        kinesis.split_shard(stream, parent, 2**127 // 2)
        kinesis.wait_active(stream)
        producer.put_rounds(10)
        results = asyncio.run(run_both(kinesis, stream, producer.acknowledged))
        left = sorted(c.name for c in FanOut(kinesis).list_consumers(kinesis.describe_stream(stream).arn))
    ok = True
    for name, records in results.items():
        report = check_order(records, producer.expected())
        print(f"{name}: {len(records)} records from {len({r.shard_id for r in records})} shards; {report.summary()}")
        ok = ok and report.ok
    print(f"stream consumers after close: {left or 'none'}")
    print("both applications, exactly once and in key order, consumers deregistered:", "OK" if ok and not left else "FAILED")
    return 0 if ok and not left else 1


if __name__ == "__main__":
    sys.exit(main())
