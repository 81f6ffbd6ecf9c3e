"""An executor whose Python cannot import kinesis-src says which executor it is and how to fix it.

Source objects pickle as calls to :func:`restore`, which imports their module first
(docs/spark-cluster.md, "When an executor does not have it").
"""

from __future__ import annotations

import copyreg
import importlib
import os
import pickle
import socket
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

DOCS = "docs/spark-cluster.md"
FIXES = (
    "ship it with the job (spark-submit --py-files kinesis_src.zip, a zip of the kinesis_src, lineage and "
    "pyspark_kinesis packages, with spark.dataSource.register(KinesisDataSource) in the job), or --archives "
    "with a packed venv that has it, or pip install kinesis-src on every node"
)


def restore(module: str, payload: bytes) -> Any:
    """Unpickle a source object on an executor, after checking that its module imports there (the clear error)."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(missing_message(exc), name=exc.name) from None
    build, args, state = pickle.loads(payload)
    obj = build(*args)
    if state is not None:
        _set_state(obj, state)
    return obj


OURS = ("kinesis_src", "lineage", "pyspark_kinesis")
DEPENDENCY_FIXES = (
    "it includes compiled code, so shipping files with the job cannot bring it: pip install kinesis-src[spark] "
    "on every node, or --archives with a packed venv that has it"
)


def missing_message(exc: ImportError) -> str:
    where = f"Spark executor {_executor()} ({exc}; Python {sys.executable}, working directory {os.getcwd()})"
    top = (exc.name or "").partition(".")[0]
    if top and top not in OURS:
        return f"kinesis-src's dependency {top} cannot be imported on {where}: {DEPENDENCY_FIXES}. See {DOCS}."
    return f"kinesis-src cannot be imported on {where}: {FIXES}. See {DOCS}."


def _executor() -> str:
    """This executor as Spark's cluster managers name it: its id (standalone, Kubernetes) or container (YARN)."""
    log_url = os.environ.get("SPARK_LOG_URL_STDERR", "")  # standalone workers give it to executors
    executor_id = os.environ.get("SPARK_EXECUTOR_ID") or parse_qs(urlsplit(log_url).query).get("executorId", [""])[0]
    where = executor_id or os.environ.get("CONTAINER_ID", "")
    return f"{where} on host {socket.gethostname()}" if where else f"on host {socket.gethostname()}"


def _set_state(obj: Any, state: Any) -> None:
    """What pickle does with an object's state: ``__setstate__``, else the instance dict (and slots)."""
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        obj.__dict__.update(state)
    for name, value in (slots or {}).items():
        setattr(obj, name, value)


def _reduce(obj: Any) -> tuple[Any, tuple[str, bytes]]:
    """``obj`` as ``restore(module, payload)``: its usual reduction, pickled inside the payload."""
    from pyspark import cloudpickle

    build, args, state = obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL)[:3]
    return restore, (type(obj).__module__, cloudpickle.dumps((build, args, state), protocol=pickle.DEFAULT_PROTOCOL))


def guard(*classes: type) -> None:
    """Pickle instances of ``classes`` through :func:`restore`, and send this module's functions by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    for cls in classes:
        copyreg.pickle(cls, _reduce)


def guard_source_objects() -> None:
    """:func:`guard` what Spark ships to executors: the data source and this PySpark's readers."""
    from .batch import KinesisBatchReader
    from .compat import runtime
    from .source import KinesisDataSource

    if runtime().trigger_api:
        from .stream import KinesisStreamReader as StreamReader
    else:
        from .stream_legacy import LegacyStreamReader as StreamReader
    guard(KinesisDataSource, KinesisBatchReader, StreamReader)
