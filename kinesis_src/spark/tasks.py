"""Executor side: read a partition's shards and yield Arrow batches.

Runs in Spark's Python workers, which are reused across tasks, so the
Kinesis client is cached per process and per endpoint instead of being
rebuilt (a botocore client costs ~50 ms to create).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Iterator

import pyarrow as pa

from ..aws import KinesisClient
from ..reader import ShardRead, ShardReader
from .partitions import Endpoint, KinesisPartition, ShardSlice
from .rows import page_to_arrow

log = logging.getLogger(__name__)


@lru_cache(maxsize=8)
def kinesis_client(endpoint: Endpoint) -> KinesisClient:
    return KinesisClient(endpoint.settings())


def read_partition(partition: KinesisPartition) -> Iterator[pa.RecordBatch]:
    """Read every slice in order (the driver put parents before children) and yield their pages."""
    kinesis = kinesis_client(partition.endpoint)
    for piece in partition.slices:
        read = read_slice(kinesis, partition, piece)
        for page in read.pages:
            if len(page):
                yield page_to_arrow(page, partition.stream, piece.shard_id)


def read_slice(kinesis: KinesisClient, partition: KinesisPartition, piece: ShardSlice) -> ShardRead:
    """Read one shard from its start to the first stop the partition sets."""
    reader = ShardReader(
        kinesis,
        partition.stream,
        piece.shard_id,
        piece.start_position,
        max_records_per_fetch=partition.max_records_per_fetch,
        fetch_interval_s=partition.fetch_interval_ms / 1000,
    )
    duration = partition.max_fetch_duration_ms / 1000 if partition.max_fetch_duration_ms else None
    read = reader.read(
        max_records=piece.max_records,
        max_duration_s=duration,
        until_caught_up=True,
        end_sequence=piece.end_sequence,
        end_timestamp=partition.end_time,
    )
    log.info(
        "shard %s of %r: %d records from %s, stopped: %s",
        piece.shard_id, partition.stream, read.record_count, piece.start_position, read.stop_reason.value,
    )
    return read
