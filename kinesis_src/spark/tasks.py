"""Executor side: read a partition's shards and yield Arrow batches.

With ``hashKeyRange`` only the rows are filtered: reads, counts and recorded ends stay the shard's.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import lru_cache
from typing import Any, Generator, Iterator

import pyarrow as pa

from ..aws import KinesisClient
from ..aws.whole_body import read_bodies_whole
from ..errors import DataLossError, MalformedResponseError, ShardNotFoundError
from ..key_filter import filter_page
from ..positions import Position
from ..records import RecordPage
from ..retrieval.bounded import BoundedRead
from ..retrieval.fanout import FanOutReader
from ..retrieval.polling import ShardRead, ShardReader, StopReason
from .frontier import TRIMMED_STOP, BatchEnd
from .partitions import Endpoint, KinesisPartition, ShardSlice
from .progress_log import task_progress_log
from .retention import SKIP_HINT
from .rows import page_to_arrow
from .task_figures import NO_RETRIES, RetryTally, counted

log = logging.getLogger(__name__)


@lru_cache(maxsize=8)
def kinesis_client(endpoint: Endpoint) -> KinesisClient:
    """The process's client for ``endpoint``: bodies are read in one read (:mod:`kinesis_src.aws.whole_body`)."""
    kinesis = KinesisClient(endpoint.settings())
    read_bodies_whole(kinesis.botocore_client)
    return kinesis


def page_batch(page: RecordPage, partition: KinesisPartition, shard_id: str) -> pa.RecordBatch | None:
    """The rows of ``page`` Spark gets (in the key range, if any) as an Arrow batch, or None."""
    if partition.key_range is not None and len(page):
        page = filter_page(page, partition.key_range)
    return page_to_arrow(page, partition.stream, shard_id) if len(page) else None


def read_partition(partition: KinesisPartition) -> Iterator[pa.RecordBatch]:
    """Read every slice in order (parents before children), yielding each page as it comes.

    No end to record first (unlike :func:`read_stream_partition`): a task holds one page at a time.
    """
    kinesis = kinesis_client(partition.endpoint)
    for piece in partition.slices:
        yield from stream_slice(kinesis, partition, piece)


def stream_slice(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice) -> Iterator[pa.RecordBatch]:
    """:func:`read_slice`, page by page, as Arrow batches."""
    reader = shard_reader(kinesis, partition, piece)
    try:
        reason = yield from arrow_pages(reader.iter_pages(**slice_limits(partition, piece)), partition, piece)
    except ShardNotFoundError as exc:
        reason = vanished(partition, piece, exc).stop_reason  # pages already yielded were read: they stay
    finally:
        reader.close()  # a fan-out subscription; also when Spark stops early (a LIMIT) and closes this generator
    log.info(
        "shard %s of %r: read from %s to %s, stopped: %s",
        piece.shard_id, partition.stream, piece.start_position, reader.position, reason.value,
    )


def arrow_pages(
    pages: Generator[RecordPage, None, StopReason], partition: KinesisPartition, piece: ShardSlice
) -> Generator[pa.RecordBatch, None, StopReason]:
    """Each page with rows for Spark as an Arrow batch; returns the stop reason ``pages`` returned."""
    while True:
        try:
            page = next(pages)
        except StopIteration as done:
            return done.value
        batch = page_batch(page, partition, piece.shard_id)
        if batch is not None:
            yield batch


def shard_reader(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice) -> BoundedRead:
    """A polling reader, or a fan-out one with consumerMode=efo: the same bounded read either way."""
    if partition.fan_out is not None:
        return FanOutReader(
            kinesis.fan_out(),
            partition.fan_out.consumer_arn,
            partition.stream,
            piece.shard_id,
            piece.start_position,
            stream_arn=partition.fan_out.stream_arn,
            max_records_per_fetch=partition.max_records_per_fetch,
            strict_aggregation=partition.strict_aggregation,
        )
    return ShardReader(
        kinesis,
        partition.reference,  # a stream given by ARN is called by ARN (cross-account); rows and logs keep the name
        piece.shard_id,
        piece.start_position,
        max_records_per_fetch=partition.max_records_per_fetch,
        fetch_interval_s=partition.fetch_interval_ms / 1000,
        strict_aggregation=partition.strict_aggregation,
    )


def read_slice(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice) -> ShardRead:
    """Read one shard from its start to the first stop the partition sets."""
    reader = shard_reader(kinesis, partition, piece)
    try:
        read = reader.read(**slice_limits(partition, piece))
    except ShardNotFoundError as exc:
        return vanished(partition, piece, exc)
    log.info(
        "shard %s of %r: %d records from %s, stopped: %s",
        piece.shard_id, partition.stream, read.record_count, piece.start_position, read.stop_reason.value,
    )
    return read


def read_counted(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice) -> tuple[ShardRead, RetryTally]:
    """:func:`read_slice` and the retries it made (one task per Python worker at a time: see :mod:`.task_figures`)."""
    return counted(lambda: read_slice(kinesis, partition, piece))


def slice_limits(partition: KinesisPartition, piece: ShardSlice) -> dict[str, Any]:
    """Where a task's read of one shard stops: the first of the partition's and the slice's limits."""
    duration = partition.max_fetch_duration_ms / 1000 if partition.max_fetch_duration_ms else None
    return {
        "max_records": piece.max_records,
        "max_duration_s": duration,
        "until_caught_up": True,
        "end_sequence": piece.end_sequence,
        "end_timestamp": partition.end_time,
    }


def vanished(partition: KinesisPartition, piece: ShardSlice, error: ShardNotFoundError) -> ShardRead:
    """The shard was listed when the batch was planned and is gone now: trimmed past retention.

    failOnDataLoss=true: :class:`DataLossError` (nothing recorded, so a retry fails alike). Else
    it reads as ended with no records, so the planner drains it and its children become ready.
    """
    start = piece.start_position
    message = (
        f"shard {piece.shard_id} of stream {partition.stream!r} was trimmed past retention before it was "
        f"read (unread from {start})"
    )
    if partition.fail_on_data_loss:
        raise DataLossError(f"{message}; {SKIP_HINT}") from error
    log.warning("%s; skipping it because failOnDataLoss=false", message)
    return ShardRead(piece.shard_id, start, start, [], StopReason.SHARD_END, None)


def read_stream_partition(partition: KinesisPartition) -> Iterator[pa.RecordBatch]:
    """One micro-batch task: read, record each shard's end (first writer wins), then yield.

    Rows always run to the recorded end, even another attempt's, so a replayed batch is identical.
    """
    kinesis = kinesis_client(partition.endpoint)
    counted_reads = {piece.shard_id: read_counted(kinesis, partition, piece) for piece in partition.slices}
    reads = {sid: read for sid, (read, _) in counted_reads.items()}
    ours = {sid: batch_end(read, tally) for sid, (read, tally) in counted_reads.items()}
    for sid, read in reads.items():
        if read.shard_ended and not read.pages:  # only vanished() ends a shard without a single page
            ours[sid] = replace(ours[sid], stop_reason=TRIMMED_STOP)
    meta = partition.progress
    progress = task_progress_log(partition.endpoint.settings(), meta["table"], meta["application"], partition.stream)
    recorded = progress.record_many(meta["run"], int(meta["batch"]), ours)
    for piece in partition.slices:
        read = reads[piece.shard_id]
        winner = recorded[piece.shard_id]
        if winner.next_position != ours[piece.shard_id].next_position:
            log.info(
                "shard %s: batch %s already recorded an end at %s (this attempt reached %s); replaying to it",
                piece.shard_id, meta["batch"], winner.next_position, ours[piece.shard_id].next_position,
            )
            read = replay_slice(kinesis, partition, piece, winner)
        for page in read.pages:
            batch = page_batch(page, partition, piece.shard_id)
            if batch is not None:
                yield batch


def batch_end(read: ShardRead, tally: RetryTally = NO_RETRIES) -> BatchEnd:
    """The end to record for ``read``, with what it cost (bytes of record data, the retries it made)."""
    return BatchEnd(
        next_position=read.next_position,
        record_count=read.record_count,
        shard_end=read.shard_ended,
        stop_reason=read.stop_reason.value,
        millis_behind_latest=read.millis_behind_latest,
        byte_count=sum(page.byte_count for page in read.pages),
        throttles=tally.throttles,
        retries=tally.retries,
    )


def replay_slice(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice, end: BatchEnd) -> ShardRead:
    """Read exactly from the slice's start to a recorded end: no record or time limit applies."""
    reader = shard_reader(kinesis, partition, piece)
    if end.record_count == 0 or end.next_position == piece.start_position:
        return ShardRead(piece.shard_id, piece.start_position, piece.start_position, [], StopReason.END_SEQUENCE, None)
    last = end.next_position.sequence_number
    if last is None or end.next_position != Position.after_sequence(last):
        raise MalformedResponseError(
            f"recorded end {end.next_position} of shard {piece.shard_id} in batch {partition.progress['batch']} "
            "is not a position after a sequence number; the progress item was edited by hand?"
        )
    return reader.read(end_sequence=last)
