"""kcl-rs (the Rust KCL with Python bindings) as a peer worker.

Run with benchmarks/peers/.venv-kcl-rs. Polling retrieval (every peer polls;
kinesis-mock's SubscribeToShard is not what AWS sends), ``max_records`` and
``idle_time_between_reads_millis`` from the shared command line. kcl-rs
exposes no failover-time option: its KCL default applies (10 s, the same as
the others). Endpoints go through the AWS SDK's per-service variables
(``AWS_ENDPOINT_URL_KINESIS`` / ``_DYNAMODB`` / ``_CLOUDWATCH``), because
its single ``endpoint_url`` would send DynamoDB calls to Kinesis.
Every batch goes to the delivery log, then is checkpointed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common_args import REGION, announce, parse  # noqa: E402
from sink import Sink  # noqa: E402


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    os.environ["AWS_ENDPOINT_URL_KINESIS"] = args.kinesis
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args.dynamodb
    os.environ.setdefault("AWS_ENDPOINT_URL_CLOUDWATCH", args.dynamodb)  # metrics calls fail fast, locally
    from kcl_rs import RecordProcessorBase, Scheduler

    sink = Sink(args.sink, args.worker)

    class Processor(RecordProcessorBase):
        shard = "?"

        def initialize(self, i):  # noqa: ANN001
            self.shard = i.shard_id or "?"

        def process_records(self, p):  # noqa: ANN001
            sink.write_batch(self.shard, ((r.sequence_number, r.partition_key, r.data) for r in p.records))
            if p.records:
                p.checkpointer.checkpoint()

        def lease_lost(self, _l):  # noqa: ANN001
            pass

        def shard_ended(self, s):  # noqa: ANN001
            s.checkpointer.checkpoint()

        def shutdown_requested(self, s):  # noqa: ANN001
            s.checkpointer.checkpoint()

    scheduler = Scheduler(
        stream_name=args.stream,
        application_name=args.app,
        record_processor_factory=Processor,
        worker_identifier=args.worker,
        region=REGION,
        initial_position="TRIM_HORIZON",
        retrieval_mode="POLLING",
        max_records=args.max_records,
        idle_time_between_reads_millis=args.idle_ms,
    )
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=scheduler.shutdown).start())
    announce(args.worker)
    scheduler.run()


if __name__ == "__main__":
    main()
