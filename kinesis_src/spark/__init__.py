"""The Spark data source (imports pyspark; install the ``spark`` extra)."""

from .executor_import import guard_source_objects
from .source import KinesisDataSource

guard_source_objects()  # an executor without the package says so, naming itself and the fix

__all__ = ["KinesisDataSource"]
