"""native-aws-kcl-py (a pure-Python asyncio KCL) as a peer worker.

Run with benchmarks/peers/.venv-native-aws-kcl-py. Its documented defaults
except the matched settings: ``max_records``, ``idle_time_between_reads_millis``,
``lease_duration_millis`` (its failover time); metrics stay off (its default).
Every batch goes to the delivery log, then is checkpointed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common_args import REGION, announce, parse  # noqa: E402
from sink import Sink  # noqa: E402


async def run() -> None:
    args = parse(__doc__.splitlines()[0])
    from native_aws_kcl_py import (
        AwsConfig,
        KinesisConsumerConfig,
        Scheduler,
        ShardRecordProcessor,
        ShardRecordProcessorFactory,
    )
    from native_aws_kcl_py.types.config import CoordinatorConfig, RetrievalConfig

    sink = Sink(args.sink, args.worker)

    class Processor(ShardRecordProcessor):
        shard = "?"

        async def initialize(self, i):  # noqa: ANN001
            self.shard = i.shard_id

        async def process_records(self, p):  # noqa: ANN001
            sink.write_batch(self.shard, ((r.sequence_number, r.partition_key, r.data) for r in p.records))
            if p.records:
                await p.checkpointer.checkpoint()

        async def lease_lost(self, _l):  # noqa: ANN001
            pass

        async def shard_ended(self, s):  # noqa: ANN001
            await s.checkpointer.checkpoint()

        async def shutdown_requested(self, s):  # noqa: ANN001
            await s.checkpointer.checkpoint()

    class Factory(ShardRecordProcessorFactory):
        def create_processor(self) -> ShardRecordProcessor:
            return Processor()

    failover_ms = int(args.failover_s * 1000)
    config = KinesisConsumerConfig(
        aws=AwsConfig(region=REGION, kinesis_endpoint=args.kinesis, dynamodb_endpoint=args.dynamodb,
                      credentials={"access_key_id": "test", "secret_access_key": "test"}),
        application_name=args.app,
        stream_name=args.stream,
        record_processor_factory=Factory(),
        worker_identifier=args.worker,
        retrieval=RetrievalConfig(stream_name=args.stream, max_records=args.max_records,
                                  idle_time_between_reads_millis=args.idle_ms),
        coordinator=CoordinatorConfig(lease_duration_millis=failover_ms,
                                      lease_acquisition_interval_millis=2 * failover_ms + 25,
                                      lease_renewal_interval_millis=failover_ms // 3),
    )
    scheduler = Scheduler(config)
    loop = asyncio.get_running_loop()
    stop = getattr(scheduler, "shutdown", None)
    if stop is not None:
        loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(stop()))
    announce(args.worker)
    await scheduler.run()


if __name__ == "__main__":
    asyncio.run(run())
