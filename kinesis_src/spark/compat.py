"""Which PySpark runs this process, and which parts of the Python data-source API it has.

Features are looked up, never imported blindly: a missing module kills the query inside Spark's
source runner with an error no user can act on.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache

from ..errors import ConfigurationError

SUPPORTED_RANGE = ">=4.0,<5"
MINIMUM = (4, 0)
TRIGGER_API_MODULE = "pyspark.sql.streaming.datasource"
TRIGGER_API_SINCE = "4.2"


@dataclass(frozen=True)
class SparkRuntime:
    """The running PySpark's version and whether it has the 4.2 streaming API (admission control, AvailableNow)."""

    version: str
    trigger_api: bool


def minor_of(version: str) -> tuple[int, int]:
    """``"4.1.4"`` -> ``(4, 1)``; pre-release and local tags (``4.2.0.dev1``, ``4.0.0rc1``) count as their minor."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ConfigurationError(
            f"PySpark version {version!r} is not of the form MAJOR.MINOR[.PATCH]; kinesis-src needs pyspark{SUPPORTED_RANGE}"
        )
    return int(found[1]), int(found[2])


def check_supported(version: str) -> None:
    """Refuse a PySpark older than 4.0, naming the version found and the range supported."""
    if minor_of(version) < MINIMUM:
        raise ConfigurationError(
            f"kinesis-src's Spark source needs PySpark 4.0 or newer (the Python data-source API; supported: "
            f"pyspark{SUPPORTED_RANGE}), but this Python has pyspark {version}. Install a PySpark that matches "
            f"your cluster's Spark 4.x, e.g. `pip install 'kinesis-src[spark]'`, or read with kinesis_src.Consumer "
            f"/ read_table, which need no Spark"
        )


@cache
def runtime() -> SparkRuntime:
    """This process's PySpark (checked to be supported) and its streaming features, looked up once."""
    import pyspark

    version = str(pyspark.__version__)
    check_supported(version)
    return SparkRuntime(version=version, trigger_api=importlib.util.find_spec(TRIGGER_API_MODULE) is not None)


def require_trigger_api(what: str) -> None:
    """Fail naming ``what``, the running version and the version it needs, on a PySpark before 4.2."""
    found = runtime()
    if not found.trigger_api:
        raise ConfigurationError(
            f"{what} needs PySpark {TRIGGER_API_SINCE}+ ({TRIGGER_API_MODULE}); this is PySpark {found.version}. "
            f"Upgrade to PySpark {TRIGGER_API_SINCE}+, or use what {found.version} offers (docs/spark.md, "
            "'Supported Spark versions')"
        )
