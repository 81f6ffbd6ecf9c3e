"""The Python consumer for ETL jobs: :class:`Consumer` (asyncio) and :class:`BlockingConsumer`."""

from .batch import Batch
from .blocking import BlockingBatch, BlockingConsumer
from .consumer import Consumer
from .consumer_config import ConsumerConfig, default_worker_id, parse_initial_position
from .metrics import ConsumerMetrics, ShardMetrics
from ..retrieval.pacing import FetchPacing

__all__ = [
    "Batch",
    "BlockingBatch",
    "BlockingConsumer",
    "Consumer",
    "ConsumerConfig",
    "ConsumerMetrics",
    "FetchPacing",
    "ShardMetrics",
    "default_worker_id",
    "parse_initial_position",
]
