"""A scripted consumer for the processing loop (kinesis_src/consumer/processing/processor.py): no servers.

:class:`ScriptedConsumer` hands out real :class:`Batch` objects with real
:class:`ShardState` holdings and records every checkpoint; the helpers build
a :class:`Processor` on it and run it until a condition holds. Used by
tests/unit/test_processing_processor.py.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, AsyncIterator, Callable

from consumer_harness import until

from kinesis_src.consumer.batch import Batch
from kinesis_src.consumer.consumer_config import ConsumerConfig
from kinesis_src.consumer.processing import (
    Backoff,
    DeadLetter,
    DeliveredRecord,
    ProcessingMetrics,
)
from kinesis_src.consumer.processing.dead_letter import CallableDeadLetter
from kinesis_src.consumer.processing.options import parse_options
from kinesis_src.consumer.processing.processor import Processor
from kinesis_src.consumer.shard_state import ShardState
from kinesis_src.errors import LeaseLostError
from kinesis_src.records import Record, RecordPage

FAST = Backoff(initial_s=0.001, max_s=0.002)
NOWHERE = "http://127.0.0.1:9"  # the scripted consumer's endpoints: any AWS call fails, none is expected


@dataclass
class ScriptedConsumer:
    """What process() uses of a Consumer: ``__anext__``, ``stopping``, names; checkpoints recorded."""

    checkpoints: list[tuple[str, int, int, str]] = field(default_factory=list)  # (shard, holding, batch, seq)
    pulled: int = 0
    stopping: bool = False
    config: ConsumerConfig = field(default_factory=lambda: ConsumerConfig(
        "s", application_name="app", worker_id="me", region="us-east-1", endpoint_url=NOWHERE,
    ))
    handout: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(kinesis=None, dynamodb=None))
    _queue: asyncio.Queue[Batch | None] = field(default_factory=asyncio.Queue)
    _states: dict[tuple[str, int], ShardState] = field(default_factory=dict)
    _indexes: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))

    def holding(self, shard: str, generation: int = 1, owner_switches: int = 1) -> ShardState:
        return self._states.setdefault((shard, generation), ShardState(shard, owner_switches=owner_switches))

    def put(self, shard: str, rows: list[tuple[str, int]], generation: int = 1) -> Batch:
        """A batch of (partition key, sequence number) rows of ``shard``'s holding ``generation``."""
        state = self.holding(shard, generation)
        self._indexes[(shard, generation)] += 1
        page = RecordPage([k for k, _ in rows], [f"{k}:{n}".encode() for k, n in rows],
                          [f"{n:05d}" for _, n in rows], [None] * len(rows), [None] * len(rows),
                          "it", 0)
        batch = Batch("s", shard, page, self._indexes[(shard, generation)], generation, self._checkpoint, state)
        state.produce()
        self._queue.put_nowait(batch)
        return batch

    def stop(self) -> None:
        self.stopping = True
        self._queue.put_nowait(None)

    async def __anext__(self) -> Batch:
        while True:
            if self.stopping:
                raise StopAsyncIteration
            batch = await self._queue.get()
            if batch is None:
                continue
            if not batch.delivering:
                continue
            batch._state.hand_out(batch.index)  # type: ignore[union-attr]
            self.pulled += 1
            return batch

    async def _checkpoint(self, batch: Batch, record: Record | None) -> None:
        state = batch._state
        assert state is not None
        if not state.accepts_checkpoints:
            raise LeaseLostError(f"lost {batch.shard_id}", batch.shard_id)
        seq = record.sequence_number if record is not None else (batch.last_sequence_number or "end")
        self.checkpoints.append((batch.shard_id, batch.generation, batch.index, seq))
        if record is None or record.sequence_number == batch.last_sequence_number:
            state.acknowledge(batch.index)


def processor(consumer: ScriptedConsumer, handler: Any, *, letters: list[DeadLetter] | None = None,
              **options: Any) -> tuple[Processor, ProcessingMetrics]:
    settings = {"ordering": "key", "max_in_flight": 8, "max_delivery_attempts": 3, "max_buffered_records": 1000,
                    "max_buffered_bytes": 1 << 20, "retry_backoff": FAST, "checkpoint_interval_s": 0.0, "drain_timeout_s": 1.0}
    settings.update(options)
    sink = CallableDeadLetter(letters.append) if letters is not None else None
    metrics = ProcessingMetrics()
    return Processor(consumer, handler, parse_options(**settings), sink, metrics), metrics


def last_checkpoint(consumer: ScriptedConsumer, shard: str) -> str | None:
    seqs = [seq for s, _, _, seq in consumer.checkpoints if s == shard]
    return seqs[-1] if seqs else None


@asynccontextmanager
async def processing(proc: Processor, consumer: ScriptedConsumer) -> AsyncIterator[None]:
    """The loop runs while the block does; then the consumer stops and the loop ends (an error leaves it to asyncio.run)."""
    task = asyncio.create_task(proc.run())
    yield
    consumer.stop()
    await task


async def process_until_checkpoint(consumer: ScriptedConsumer, handler: Any, shard: str, seq: str,
                                   **options: Any) -> ProcessingMetrics:
    """Run the loop until ``shard``'s checkpoint reaches ``seq``, then stop it."""
    proc, metrics = processor(consumer, handler, **options)
    async with processing(proc, consumer):
        await until(lambda: last_checkpoint(consumer, shard) == seq, f"{shard}'s checkpoint at {seq}")
    return metrics


async def process_rows(rows: list[tuple[str, int]], verdict: Callable[[DeliveredRecord], None], until_seq: str,
                       **options: Any) -> tuple[list[tuple[str, str, int]], list[DeadLetter], ProcessingMetrics]:
    """``rows`` of shard-1 through a handler that logs each delivery, then lets ``verdict`` raise or not,
    until the checkpoint reaches ``until_seq``: the deliveries (sequence number, key, count), the dead
    letters and the metrics."""
    consumer = ScriptedConsumer()
    delivered: list[tuple[str, str, int]] = []
    letters: list[DeadLetter] = []

    async def handler(record: DeliveredRecord) -> None:
        delivered.append((record.sequence_number, record.partition_key, record.delivery_count))
        verdict(record)

    consumer.put("shard-1", rows)
    metrics = await process_until_checkpoint(consumer, handler, "shard-1", until_seq, letters=letters, **options)
    return delivered, letters, metrics


class GatedHandler:
    """A handler that logs each record's sequence number as it starts, then waits for ``gate`` if ``holds`` it."""

    def __init__(self, holds: Callable[[DeliveredRecord], bool] = lambda record: True) -> None:
        self.gate = asyncio.Event()
        self.started: list[str] = []
        self.holds = holds

    async def __call__(self, record: DeliveredRecord) -> None:
        self.started.append(record.sequence_number)
        if self.holds(record):
            await self.gate.wait()
