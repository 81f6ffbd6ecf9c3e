"""From a decoded GetRecords body to the Arrow batch a Spark task yields: the candidate ways, side by side.

Run::

    .venv/bin/python benchmarks/bench_page_arrow.py [--repeat 15]

On the bodies of ``bench_decode.make_body`` (10,000 x 200 B, 10,000 x 1 KB,
1,000 x 10 KB), in one run, CPU time per record (``time.process_time``),
best of ``--repeat`` rounds, the candidates interleaved round by round:

- the whole step, body to batch: ``decode_get_records`` then
  ``page_to_arrow`` (what a task does), and its parts alone: the msgspec
  decode, the page's columns (``_page``), ``page_to_arrow``;
- the ``data`` column: ``pa.array`` of the list, ``pa.array`` of a generator,
  one ``b"".join`` with offsets from pyarrow's ``cumulative_sum`` (what
  :func:`kinesis_src.arrow.binary_column` does from about 1 KB a record),
  the same with numpy's ``cumsum`` (numpy is not a dependency);
- the arrival-time column: ``pa.array`` and three compute kernels (what
  :func:`kinesis_src.arrow.arrival_micros` does), or numpy;
- the KPL prefix check of ``retrieval/aggregation.py``: a 4-byte slice per
  record, ``bytes.startswith`` per record, or a search of the raw body for
  the magic's base64 (``84ma``) before any record is looked at;
- a search of the raw body for ``"EncryptionType"`` (to skip that column's pass);
- the body's bytes copied into a fresh buffer (what one ``read()`` does)
  or into one allocated once and reused (``readinto``): the allocation's cost;
- ``pyarrow.json`` reading the records as newline-delimited JSON, cut out
  of the body beforehand (the cut not counted) and ``Data`` left base64
  (Arrow has no base64 kernel): a bound below what it would cost.

Every candidate column is checked equal to the reference (``pa.array`` of the
page's list) before it is timed. Figures: docs/performance.md, "The Spark
source against the no-I/O ceiling".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from itertools import repeat
from operator import itemgetter
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_decode import interleaved, make_body  # noqa: E402

from kinesis_src.arrow import arrival_micros, binary_column, page_to_arrow  # noqa: E402
from kinesis_src.aws import body_decode  # noqa: E402
from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC  # noqa: E402

BODIES = [(200, 10_000), (1_000, 10_000), (10_000, 1_000)]
SHARD = "shardId-000000000000"
_PREFIX = itemgetter(slice(0, len(AGGREGATE_MAGIC)))


def numpy_join(values: list[bytes]) -> pa.Array:
    n = len(values)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(map(len, values), np.int32, n), out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


def numpy_arrival(seconds: list[float | None]) -> pa.Array:
    micros = np.rint(np.fromiter(seconds, np.float64, len(seconds)) * 1e6).astype(np.int64)
    return pa.array(micros, pa.timestamp("us", tz="UTC"))


def paths(body: bytes) -> dict[str, Callable[[], object]]:
    """Each candidate as a no-argument call on ``body``; the columns checked against the reference first."""
    doc = body_decode._GET_RECORDS.decode(body)
    page = body_decode.decode_get_records(body)
    data = page.data
    reference = pa.array(data, pa.binary())
    for make in (binary_column, numpy_join, lambda v: pa.array((x for x in v), pa.binary())):
        assert make(data).equals(reference)
    reused = bytearray(len(body))
    assert numpy_arrival(page.arrival_epoch).equals(arrival_micros(pa.array(page.arrival_epoch, pa.float64())))
    return {
        "body -> batch (decode, page_to_arrow)": lambda: page_to_arrow(body_decode.decode_get_records(body), "s", SHARD),
        "  msgspec decode": lambda: body_decode._GET_RECORDS.decode(body),
        "  page's columns (_page)": lambda: body_decode._page(doc, None, "body", len(body)),
        "  page_to_arrow": lambda: page_to_arrow(page, "s", SHARD),
        "data: pa.array(list)": lambda: pa.array(data, pa.binary()),
        "data: pa.array(generator)": lambda: pa.array((x for x in data), pa.binary()),
        "data: join + pyarrow offsets": lambda: _join_always(data),
        "data: join + numpy offsets": lambda: numpy_join(data),
        "data: binary_column (chosen)": lambda: binary_column(data),
        "arrival: pa.array + kernels": lambda: arrival_micros(pa.array(page.arrival_epoch, pa.float64())),
        "arrival: numpy": lambda: numpy_arrival(page.arrival_epoch),
        "KPL check: slice per record": lambda: AGGREGATE_MAGIC in map(_PREFIX, data),
        "KPL check: startswith per record": lambda: any(map(bytes.startswith, data, repeat(AGGREGATE_MAGIC))),
        "KPL check: search the body": lambda: b"84ma" in body,
        'search the body for "EncryptionType"': lambda: b'"EncryptionType"' in body,
        "pyarrow.json, records pre-cut, Data still base64": _pyarrow_json(body),
        "body: copied into a fresh buffer": lambda: _copied(body, bytearray(len(body))),
        "body: copied into a reused buffer (readinto)": lambda: _copied(body, reused),
    }


def _copied(body: bytes, into: bytearray) -> bytearray:
    memoryview(into)[:] = body
    return into


def _pyarrow_json(body: bytes) -> Callable[[], object]:
    lines = b"\n".join(json.dumps(r, separators=(",", ":")).encode() for r in json.loads(body)["Records"])
    options = pa_json.ReadOptions(use_threads=False, block_size=len(lines) + 1)
    return lambda: pa_json.read_json(pa.BufferReader(lines), read_options=options)


def _join_always(values: list[bytes]) -> Any:
    lengths = pa.array(map(len, values), pa.int64(), size=len(values))
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths).cast(pa.int32())])
    return pa.Array.from_buffers(pa.binary(), len(values), [None, offsets.buffers()[1], pa.py_buffer(b"".join(values))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    opts = parser.parse_args()
    table: dict[str, dict[str, float]] = {}
    for size, n in BODIES:
        for name, seconds in interleaved(opts.repeat, paths(make_body(n, size))).items():
            table.setdefault(name, {})[f"{n:,} x {size:,} B"] = seconds / n * 1e6
    heads = [f"{n:,} x {size:,} B" for size, n in BODIES]
    print(f"CPU us per record, best of {opts.repeat} interleaved rounds, load {os.getloadavg()[0]:.1f}")
    print("| candidate | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(heads))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[h]:.3f}" for h in heads) + " |")


if __name__ == "__main__":
    main()
