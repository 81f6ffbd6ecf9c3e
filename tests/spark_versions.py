"""What the venv's PySpark offers, for tests of the 4.2+ stream reader (`make oldest` runs the suites on 4.0).

:data:`STREAM_MODULE` is the stream reader's module this PySpark loads
(:mod:`kinesis_src.spark.source` picks the same); :data:`needs_trigger_api`
skips a test of the 4.2 reader on 4.0/4.1, whose reader tests are in
tests/unit/test_spark_compat.py; :func:`until_drained` runs an AvailableNow
query to its end on every version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kinesis_src.spark.compat import runtime

RUNTIME = runtime()
STREAM_MODULE = "kinesis_src.spark.stream" if RUNTIME.trigger_api else "kinesis_src.spark.stream_legacy"
needs_trigger_api = pytest.mark.skipif(
    not RUNTIME.trigger_api, reason=f"the 4.2+ stream reader; this is PySpark {RUNTIME.version}"
)


def until_drained(start: Callable[[], Any], batches_run: Callable[[], int], timeout_s: float = 300) -> None:
    """Run an AvailableNow query to its end: ``start()`` starts it, ``batches_run()`` counts batches seen.

    From PySpark 4.2 one start reads everything. Before, Spark runs a source
    without AvailableNow support one micro-batch per start (docs/spark.md), so
    the query is started again until a start runs no batch.
    """
    while True:
        before = batches_run()
        query = start()
        assert query.awaitTermination(timeout_s), "AvailableNow query did not stop by itself"
        assert query.exception() is None, query.exception()
        if RUNTIME.trigger_api or batches_run() == before:
            return
