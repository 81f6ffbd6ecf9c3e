"""The Spark data source (imports pyspark; install the ``spark`` extra)."""

from .source import KinesisDataSource

__all__ = ["KinesisDataSource"]
