"""Prometheus exposition of the Spark source's figures (the ``prometheus`` extra).

The Consumer's exporter lives beside it, in :mod:`kinesis_src.consumer.prometheus`;
this package holds the Spark side, which reads a query's progress on the
driver (:mod:`kinesis_src.metrics.spark_progress`). See ``docs/metrics.md``.
"""

from .spark_progress import (
    QueryProgressCollector,
    SourceFigures,
    source_figures,
    watch_queries,
)

__all__ = ["QueryProgressCollector", "SourceFigures", "source_figures", "watch_queries"]
