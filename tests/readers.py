"""Test helper: run a reader until it is done and hand back what it delivered, in delivery order.

Shared by the tests that run the same workload through several engines
and endpoints (kinesis-mock, LocalStack, EFO, polling).
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kpl import records_of_rows
from spark_versions import until_drained  # tests/spark_versions.py

from kinesis_src import Consumer, Record

QUIET_S = 15.0  # LocalStack sends an event per second when idle: this long without a batch means done


async def deliver(worker: Consumer, count: int, quiet_s: float = QUIET_S) -> list[Record]:
    """Up to ``count`` records, checkpointing every batch; stops early after ``quiet_s`` without a batch."""
    records: list[Record] = []
    while len(records) < count:
        try:
            batch = await asyncio.wait_for(worker.__anext__(), quiet_s)
        except TimeoutError:
            break
        records.extend(batch.records)
        await batch.checkpoint()
    return records


def available_now_batches(spark: Any, options: Mapping[str, str], checkpoint: Path) -> list[list[Record]]:
    """Run ``readStream.format("kinesis")`` with an AvailableNow trigger; each micro-batch's records (first attempt)."""
    attempts: dict[int, list[list[Record]]] = defaultdict(list)
    lock = threading.Lock()

    def collect(df: Any, batch_id: int) -> None:
        rows = records_of_rows(df.collect())
        with lock:
            attempts[batch_id].append(rows)

    reader = spark.readStream.format("kinesis")
    for key, value in options.items():
        reader = reader.option(key, value)
    until_drained(
        lambda: reader.load().writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(),
        lambda: len(attempts),
    )
    return [attempts[b][0] for b in sorted(attempts)]
