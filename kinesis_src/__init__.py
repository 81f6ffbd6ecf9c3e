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
