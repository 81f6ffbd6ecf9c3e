"""The record processor the KCL MultiLangDaemon starts, one process per shard (amazon_kclpy v3 API).

Run by the daemon with benchmarks/peers/.venv-kclpy-ext's Python; reads the
delivery-log directory and worker id from ``PEERS_SINK`` / ``PEERS_WORKER``
(the daemon passes its environment on). Every batch goes to the delivery
log, then is checkpointed at its last record; a checkpoint refused because
the lease moved (``ShutdownException``) is ignored, as the KCL sample does.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from amazon_kclpy import kcl  # noqa: E402
from amazon_kclpy.v3 import processor  # noqa: E402

from sink import sink_from_env  # noqa: E402


class Processor(processor.RecordProcessorBase):
    """Logs each batch, then checkpoints it."""

    def __init__(self) -> None:
        self.shard = "?"
        self.sink = sink_from_env()

    def initialize(self, initialize_input) -> None:  # noqa: ANN001
        self.shard = initialize_input.shard_id

    def process_records(self, process_records_input) -> None:  # noqa: ANN001
        records = process_records_input.records
        if not records:
            return
        self.sink.write_batch(self.shard, ((r.sequence_number, r.partition_key, r.binary_data) for r in records))
        last = records[-1]
        self._checkpoint(process_records_input.checkpointer, last.sequence_number, last.sub_sequence_number)

    def lease_lost(self, lease_lost_input) -> None:  # noqa: ANN001
        pass

    def shard_ended(self, shard_ended_input) -> None:  # noqa: ANN001
        self._checkpoint(shard_ended_input.checkpointer)

    def shutdown_requested(self, shutdown_requested_input) -> None:  # noqa: ANN001
        self._checkpoint(shutdown_requested_input.checkpointer)

    @staticmethod
    def _checkpoint(checkpointer, sequence=None, sub=None) -> None:  # noqa: ANN001
        try:
            checkpointer.checkpoint(sequence, sub)
        except kcl.CheckpointError as exc:
            if exc.value != "ShutdownException":
                raise


if __name__ == "__main__":
    kcl.KCLProcess(Processor()).run()
