"""The stream reader on PySpark 4.0 and 4.1, where ``latestOffset()`` gets no start or limit.

It keeps the start (after a restart, the ``end`` of Spark's first ``partitions`` call) and applies
``maxRecordsPerTrigger`` itself (docs/spark.md, "Supported Spark versions").
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from pyspark.sql.datasource import InputPartition

from .compat import TRIGGER_API_SINCE, runtime
from .options import SourceOptions
from .stream_core import StreamReaderCore

__all__ = ["LegacyStreamReader"]

log = logging.getLogger(__name__)


class LegacyStreamReader(StreamReaderCore):
    """``format("kinesis")``'s stream reader through the ``latestOffset()`` of PySpark 4.0 and 4.1."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._latest: dict[str, Any] | None = None  # where the next batch starts; None until Spark or we say
        self._noted = False

    def latestOffset(self) -> dict[str, Any]:
        if not self._noted:
            self._noted = True
            log.info(
                "PySpark %s: maxRecordsPerTrigger is applied by the source; Trigger.AvailableNow runs one micro-batch "
                "per start (Spark's fallback) and lag is not in the query progress: both need PySpark %s+",
                runtime().version, TRIGGER_API_SINCE,
            )
        start = self._latest if self._latest is not None else self.initialOffset()
        self._latest = self.next_offset(start, self.options.max_records_per_trigger)
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """A restart's first call names the checkpoint's last offset: the next batch starts there."""
        if self._latest is None:
            self._latest = end
        return super().partitions(start, end)
