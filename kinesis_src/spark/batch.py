"""``spark.read.format("kinesis")``: a bounded read of the whole lineage between two points.

Partitions come parents-first, stream after stream, so whatever keeps partition order
(``collect()``, a single-file write) sees each key's records in write order across reshards.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..aws import KinesisClient
from ..discovery import ShardDiscovery
from ..positions import format_timestamp
from ..retrieval.registration import ConsumerMode, register
from ..stream_ref import StreamRef
from .options import SourceOptions
from .partitions import Endpoint, KinesisPartition, ShardSlice
from .planner import shards_in_order
from .tasks import kinesis_client, read_partition

log = logging.getLogger(__name__)


def endpoint_of(options: SourceOptions) -> Endpoint:
    return Endpoint(options.region, options.endpoint_url, options.dynamodb_endpoint_url, options.credentials)


class KinesisBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def _end(self) -> datetime:
        """The arrival-time cut: endingTimestamp, or the moment of planning for endingPosition=latest."""
        return self.options.ending_timestamp or datetime.now(UTC)

    def partitions(self) -> Sequence[InputPartition]:
        """Every stream's partitions, stream after stream (each in its own lineage order), numbered on."""
        opts = self.options
        end = format_timestamp(self._end())
        kinesis = kinesis_client(endpoint_of(opts))  # the planner's Python worker is reused: so is its client
        out: list[InputPartition] = []
        for ref in opts.streams:
            out.extend(self._stream_partitions(kinesis, ref, end, first_index=len(out)))
        return out

    def _stream_partitions(self, kinesis: KinesisClient, ref: StreamRef, end: str, first_index: int) -> list[KinesisPartition]:
        opts = self.options
        discovery = ShardDiscovery(kinesis, ref.target)
        discovery.refresh(opts.initial_position)
        shards = shards_in_order(discovery.graph, opts.key_range)
        start = opts.initial_position.to_dict()
        groups = [shards[i : i + opts.shards_per_task] for i in range(0, len(shards), opts.shards_per_task)]
        fan_out = (
            register(kinesis, ref.target, opts.consumer_name, stream_arn=ref.arn)
            if opts.consumer_mode is ConsumerMode.EFO
            else None
        )
        skipped = len(discovery.graph) - len(shards)
        log.info(
            "batch read of %r: %d shards in %d partitions%s, from %s to %s",
            ref, len(shards), len(groups),
            f" ({skipped} outside hashKeyRange {opts.key_range})" if opts.key_range else "",
            opts.initial_position, end,
        )
        return [
            KinesisPartition(
                index=first_index + i,
                stream=ref.name,
                endpoint=endpoint_of(opts),
                slices=tuple(ShardSlice(shard_id=s, start=start) for s in group),
                max_records_per_fetch=opts.max_records_per_fetch,
                fetch_interval_ms=opts.fetch_interval_ms,
                end_timestamp=end,
                fail_on_data_loss=opts.fail_on_data_loss,
                strict_aggregation=opts.strict_aggregation,
                fan_out=fan_out,
                key_range=opts.key_range,
                stream_ref=ref if ref.arn else None,
            )
            for i, group in enumerate(groups)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KinesisPartition)
        return read_partition(partition)

