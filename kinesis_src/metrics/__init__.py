"""Prometheus exposition of the Spark source's figures (``prometheus`` extra; docs/metrics.md)."""

from .spark_progress import (
    QueryProgressCollector,
    SourceFigures,
    source_figures,
    watch_queries,
)

__all__ = ["QueryProgressCollector", "SourceFigures", "source_figures", "watch_queries"]
