"""kinesis-src: read Kinesis Data Streams correctly through splits and merges.

The public surface is re-exported here; everything else is internal.
Importing this package never imports pyspark.
"""

from .aws import KinesisClient
from .config import AwsSettings
from .drain import drain_stream
from .errors import KinesisSourceError
from .positions import Position
from .reader import ShardRead, ShardReader
from .records import Record, RecordPage
from .retry import RetryPolicy

__all__ = [
    "AwsSettings",
    "KinesisDataSource",
    "KinesisClient",
    "KinesisSourceError",
    "Position",
    "Record",
    "RecordPage",
    "RetryPolicy",
    "ShardRead",
    "ShardReader",
    "drain_stream",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``KinesisDataSource`` is imported on first use, so ``import kinesis_src`` never needs pyspark."""
    if name == "KinesisDataSource":
        from .spark import KinesisDataSource

        return KinesisDataSource
    raise AttributeError(f"module 'kinesis_src' has no attribute {name!r}")
