"""Lets ``spark.read.format("kinesis")`` work without ``spark.dataSource.register``.

PySpark looks for top-level modules named ``pyspark_<x>`` that expose a
``DefaultSource`` and registers them under ``DefaultSource.name()``.
"""

from kinesis_src.spark.source import KinesisDataSource as DefaultSource

__all__ = ["DefaultSource"]
