"""kinesis-src: read Kinesis Data Streams correctly through splits and merges.

The public surface is re-exported here; everything else is internal.
Importing this package never imports pyspark.
"""

from lineage import KeyRange

from .aws import KinesisClient
from .config import AwsSettings, CredentialSource
from .consumer import BlockingConsumer, Consumer, ConsumerMetrics
from .drain import drain_stream
from .errors import KinesisSourceError
from .leases.coordinator import LeaseCoordinator, LeaseListener, LeaseTiming
from .leases.model import Checkpoint, Lease
from .leases.progress import ProgressStore, ShardProgress
from .leases.shard_sync import ShardSync
from .leases.table import LeaseTable
from .names import default_table_name
from .positions import Position
from .records import Record, RecordPage
from .retrieval.polling import ShardRead, ShardReader
from .retry import RetryPolicy
from .window import read_table

__all__ = [
    "AwsSettings",
    "BlockingConsumer",
    "Checkpoint",
    "Consumer",
    "ConsumerMetrics",
    "CredentialSource",
    "KeyRange",
    "KinesisClient",
    "KinesisDataSource",
    "KinesisSourceError",
    "Lease",
    "LeaseCoordinator",
    "LeaseListener",
    "LeaseTable",
    "LeaseTiming",
    "Position",
    "ProgressStore",
    "Record",
    "RecordPage",
    "RetryPolicy",
    "ShardProgress",
    "ShardRead",
    "ShardReader",
    "ShardSync",
    "default_table_name",
    "drain_stream",
    "read_table",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``KinesisDataSource`` is imported on first use, so ``import kinesis_src`` never needs pyspark."""
    if name == "KinesisDataSource":
        from .spark import KinesisDataSource

        return KinesisDataSource
    raise AttributeError(f"module 'kinesis_src' has no attribute {name!r}")
