"""``spark.read.format("kinesis")``: a bounded read of the whole lineage between two points.

The driver lists every shard in the window (closed ones within retention
included), orders them parents-first and packs consecutive shards into
partitions. Partitions are returned in that order, so anything that keeps
partition order (``collect()``, ``toLocalIterator()``, a single-file write)
sees each key's records in write order across splits and merges.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..discovery import ShardDiscovery
from ..positions import format_timestamp
from ..retrieval.registration import ConsumerMode, register
from .options import SourceOptions
from .partitions import Endpoint, KinesisPartition, ShardSlice
from .planner import lineage_rank
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
        opts = self.options
        end = self._end()
        kinesis = kinesis_client(endpoint_of(opts))  # the planner's Python worker is reused: so is its client
        discovery = ShardDiscovery(kinesis, opts.stream_name)
        discovery.refresh(opts.initial_position)
        rank = lineage_rank(discovery.graph)
        shards = sorted(discovery.graph.shard_ids(), key=lambda s: (rank[s], s))
        start = opts.initial_position.to_dict()
        groups = [shards[i : i + opts.shards_per_task] for i in range(0, len(shards), opts.shards_per_task)]
        fan_out = register(kinesis, opts.stream_name, opts.consumer_name) if opts.consumer_mode is ConsumerMode.EFO else None
        log.info(
            "batch read of %r: %d shards in %d partitions, from %s to %s",
            opts.stream_name, len(shards), len(groups), opts.initial_position, format_timestamp(end),
        )
        return [
            KinesisPartition(
                index=i,
                stream=opts.stream_name,
                endpoint=endpoint_of(opts),
                slices=tuple(ShardSlice(shard_id=s, start=start) for s in group),
                max_records_per_fetch=opts.max_records_per_fetch,
                fetch_interval_ms=opts.fetch_interval_ms,
                end_timestamp=format_timestamp(end),
                fail_on_data_loss=opts.fail_on_data_loss,
                strict_aggregation=opts.strict_aggregation,
                fan_out=fan_out,
            )
            for i, group in enumerate(groups)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KinesisPartition)
        return read_partition(partition)

