"""``format("kinesis")``: the PySpark data source users register (or get automatically).

Options are parsed and checked when the reader is created, which Spark does
while analysing ``load()``: a bad option fails there, naming the option,
before any task runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from ..errors import ConfigurationError
from .options import parse_options
from .rows import SCHEMA, SCHEMA_DDL


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
        from .stream import KinesisStreamReader

        _check_schema(schema)
        return KinesisStreamReader(parse_options(self.options, batch=False))


def _check_schema(schema: StructType) -> None:
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in SCHEMA.fields]:
        raise ConfigurationError(
            f"format 'kinesis' has a fixed schema ({SCHEMA_DDL}); do not pass .schema(...), "
            "or pass exactly this one"
        )
