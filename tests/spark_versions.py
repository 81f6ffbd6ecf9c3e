"""What the venv's PySpark offers, for tests of the 4.2+ stream reader (`make oldest` runs the suites on 4.0).

:data:`STREAM_MODULE` is the stream reader's module this PySpark loads
(:mod:`kinesis_src.spark.source` picks the same); :data:`needs_trigger_api`
skips a test of the 4.2 reader on 4.0/4.1, whose reader tests are in
tests/unit/test_spark_compat.py.
"""

from __future__ import annotations

import pytest

from kinesis_src.spark.compat import runtime

RUNTIME = runtime()
STREAM_MODULE = "kinesis_src.spark.stream" if RUNTIME.trigger_api else "kinesis_src.spark.stream_legacy"
needs_trigger_api = pytest.mark.skipif(
    not RUNTIME.trigger_api, reason=f"the 4.2+ stream reader; this is PySpark {RUNTIME.version}"
)
