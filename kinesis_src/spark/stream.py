"""The stream reader on PySpark 4.2+: admission control, AvailableNow and progress figures."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from ..positions import format_timestamp
from .compat import require_trigger_api
from .stream_core import StreamReaderCore

require_trigger_api("kinesis_src.spark.stream")  # before the import below, which a PySpark before 4.2 cannot satisfy

from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

__all__ = ["KinesisStreamReader"]

log = logging.getLogger(__name__)


class KinesisStreamReader(StreamReaderCore, SupportsTriggerAvailableNow):
    """``format("kinesis")``'s stream reader through PySpark 4.2's admission-control API."""

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cut = format_timestamp(datetime.now(UTC))
        log.info("AvailableNow: reading records that arrived up to %s", self._cut)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return self.next_offset(start, limit.max_rows if isinstance(limit, ReadMaxRows) else None)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """Lag, data loss and read figures, shown as the source's ``latestOffset`` in each query progress."""
        if not self._drivers:
            return None
        if len(self.options.streams) == 1 and self._driver is not None:
            driver = self._driver
            return {"millisBehindLatest": dict(sorted(driver.lag.items())), "dataLoss": driver.data_loss(),
                    "recordsRead": dict(sorted(driver.records_read.items())), **driver.read_totals.report()}
        drivers = sorted(self._drivers.items())
        costs = {name: d.read_totals.report() for name, d in drivers}
        return {
            "millisBehindLatest": {name: dict(sorted(d.lag.items())) for name, d in drivers},
            "dataLoss": {name: d.data_loss() for name, d in drivers},
            "recordsRead": {name: dict(sorted(d.records_read.items())) for name, d in drivers},
            **{key: {name: cost[key] for name, cost in costs.items()} for key in ("bytesRead", "throttles", "retries")},
        }
