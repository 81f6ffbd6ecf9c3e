"""A KCL MultiLangDaemon record processor (amazon_kclpy v3) for the KCL migration test.

Run by the daemon as ``python kcl_record_processor.py OUT_DIR``, one process
per shard. Every record it is given is written to ``OUT_DIR/<shard>-<pid>.jsonl``
(shard, sequence and sub-sequence number, partition key, data) *before* it
checkpoints, so the file is what KCL processed. It checkpoints each batch at
its middle record, never at its end, so the records after that point are
processed but not yet checkpointed until the next batch (what a stop leaves
behind). At SHARD_END it checkpoints, as KCL requires to move on to the
children; on a requested shutdown it does not.
"""

from __future__ import annotations

import base64
import json
import os
import sys

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor


class RecordingProcessor(processor.RecordProcessorBase):
    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.shard_id = "unknown"
        self.out = None

    def initialize(self, initialize_input) -> None:  # noqa: ANN001  (amazon_kclpy's message types)
        self.shard_id = initialize_input.shard_id
        path = os.path.join(self.out_dir, f"{self.shard_id}-{os.getpid()}.jsonl")
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115  (open for the processor's life)

    def process_records(self, process_records_input) -> None:  # noqa: ANN001
        records = process_records_input.records
        for record in records:
            line = {
                "shard": self.shard_id, "seq": record.sequence_number, "sub": record.sub_sequence_number or 0,
                "key": record.partition_key, "data": base64.b64encode(record.binary_data).decode(),
            }
            self.out.write(json.dumps(line) + "\n")  # type: ignore[union-attr]
        self.out.flush()  # type: ignore[union-attr]
        if records:
            middle = records[(len(records) - 1) // 2]
            self._checkpoint(process_records_input.checkpointer, middle.sequence_number, middle.sub_sequence_number)

    def _checkpoint(self, checkpointer, sequence=None, sub=None) -> None:  # noqa: ANN001
        try:
            checkpointer.checkpoint(sequence, sub)
        except kcl.CheckpointError as exc:  # lease lost or shutting down: the next owner resumes earlier
            sys.stderr.write(f"checkpoint of {self.shard_id} at {sequence} failed: {exc.value}\n")

    def lease_lost(self, lease_lost_input) -> None:  # noqa: ANN001
        pass

    def shard_ended(self, shard_ended_input) -> None:  # noqa: ANN001
        self._checkpoint(shard_ended_input.checkpointer)

    def shutdown_requested(self, shutdown_requested_input) -> None:  # noqa: ANN001
        pass  # no checkpoint: what was processed after the last one stays unacknowledged


if __name__ == "__main__":
    kcl.KCLProcess(RecordingProcessor(sys.argv[1])).run()
