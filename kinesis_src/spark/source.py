"""``format("kinesis")``: the PySpark data source users register (or get automatically)."""

from __future__ import annotations

from .compat import runtime

runtime()  # a PySpark before 4.0 fails here, naming its version, not at the import below (it has no datasource)

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from ..errors import ConfigurationError  # noqa: E402
from .options import SourceOptions, parse_options  # noqa: E402
from .rows import SCHEMA, SCHEMA_DDL  # noqa: E402


class KinesisDataSource(DataSource):
    """Amazon Kinesis Data Streams, read parent-shard-first through splits and merges.

    Streaming: ``spark.readStream.format("kinesis").option("streamName", ...)``
    (a comma-separated list reads several streams; ``streamARN`` names them by
    ARN, other accounts included; ``hashKeyRange`` reads one hash-key slice).
    Batch: ``spark.read.format("kinesis")`` between ``initialPosition`` /
    ``startingTimestamp`` and ``endingTimestamp`` / ``endingPosition=latest``.
    Columns: partitionKey, data, stream, shardId, sequenceNumber,
    subSequenceNumber, approximateArrivalTimestamp. See docs/spark.md for
    every option.
    """

    @classmethod
    def name(cls) -> str:
        return "kinesis"

    def schema(self) -> StructType:
        parse_options(self.options, batch=None)  # fail at load() on any option error we can see yet
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from .batch import KinesisBatchReader

        _check_schema(schema)
        return KinesisBatchReader(parse_options(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return stream_reader(parse_options(self.options, batch=False))


def stream_reader(options: SourceOptions) -> DataSourceStreamReader:
    """The stream reader for this PySpark's streaming API (4.2+: admission control and AvailableNow)."""
    if runtime().trigger_api:
        from .stream import KinesisStreamReader

        return KinesisStreamReader(options)
    from .stream_legacy import LegacyStreamReader

    return LegacyStreamReader(options)


def _check_schema(schema: StructType) -> None:
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in SCHEMA.fields]:
        raise ConfigurationError(
            f"format 'kinesis' has a fixed schema ({SCHEMA_DDL}); do not pass .schema(...), "
            "or pass exactly this one"
        )
