"""Per-record cost of decoding GetRecords bodies, every candidate decoder side by side in one run.

Run (the comparison libraries are not dependencies of kinesis-src; install
them into the venv first, a missing one prints "not installed")::

    .venv/bin/pip install -r benchmarks/requirements-decode.txt
    .venv/bin/python benchmarks/bench_decode.py [--repeat 7] [--before REV]

Bodies of records of 50 B, 200 B, 1 KB, 10 KB and 100 KB of random bytes
(as many records as a GetRecords answer holds: at most 10,000 records and
about 10 MB), and one of KPL aggregates (100 user records of 100 B each),
written compact with the fields in Kinesis's order. Each decoder gives a
page of columns (``RecordPage``: what the Consumer's batches hold), then
either ``Record`` objects (the Consumer's ``batch.records``) or an Arrow
batch of the source's schema (``page_to_arrow``: what a Spark task yields):

- msgspec: ``kinesis_src.aws.body_decode`` (typed structs, ``Data: bytes``:
  JSON and base64 in one C pass), what every reader uses;
- msgspec + pybase64: the same structs with ``Data: str``, then pybase64;
- pysimdjson + pybase64, orjson + pybase64: the parse, then base64 per record;
- json + binascii: ``json.loads`` and ``a2b_base64`` per record (the oracle
  of tests/unit/test_body_decode.py, and the decoder of small bodies before);
- numpy cut: the quote-position cut of ``kinesis_src/aws/plain_body.py``,
  which this tree no longer has: ``--before REV`` exports REV (a revision
  that has it, e.g. 710a245) to a temporary directory and times the cut there,
  in a child process, on the same bodies (seeded), within the same run;
- botocore's parser, on the 200 B body only (the floor everything beats).

``--task`` instead reads one shard of ``--records`` records of 200 B the way
a Spark task does, in this process (``kinesis_src.spark.tasks.read_partition``:
HTTP, decode, cursor, Arrow batches; no Spark) from
``benchmarks/replay_endpoint.py`` in its own process, and prints the CPU per
record and cProfile's top functions: where a task's time goes.

Times are CPU time (``time.process_time``), the best of ``--repeat`` rounds,
the decoders interleaved round by round so other load hits all alike. Every
decoder's page is checked against msgspec's first. The choice and the
numbers: docs/performance.md, "Decoding GetRecords bodies".
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from operator import itemgetter
from typing import Any, Callable

SIZES = [(50, 10_000), (200, 10_000), (1_000, 5_000), (10_000, 500), (100_000, 50)]
"""(record bytes, records a body): GetRecords' limits are 10,000 records and 10 MB."""
KPL = (500, 100, 100)
"""KPL body: aggregates, user records an aggregate, bytes a user record."""
SHARD = "shardId-000000000000"


def make_body(records: int, size: int, seed: int = 0, datas: list[bytes] | None = None) -> bytes:
    """A compact GetRecords body, as services write it; the same bytes for the same arguments."""
    rng = random.Random(seed * 1_000_003 + size)
    datas = datas if datas is not None else [rng.randbytes(size) for _ in range(records)]
    recs = [
        {
            "SequenceNumber": str(49_590_000_000_000_000_000_000_000_000_000_000_000_000_000 + i),
            "ApproximateArrivalTimestamp": round(1_700_000_000 + i / 1000, 3),
            "Data": base64.b64encode(data).decode(),
            "PartitionKey": f"key-{i % 97}",
        }
        for i, data in enumerate(datas)
    ]
    body = {"Records": recs, "NextShardIterator": "A" * 200, "MillisBehindLatest": 0}
    return json.dumps(body, separators=(",", ":")).encode()


def kpl_body() -> bytes:
    """A body of KPL aggregates (aws_kinesis_agg's aggregator), seeded."""
    from aws_kinesis_agg.aggregator import RecordAggregator

    rng = random.Random(7)
    aggregates, users, size = KPL
    datas = []
    for i in range(aggregates):
        agg = RecordAggregator()
        for j in range(users):
            agg.add_user_record(f"key-{i}-{j % 10}", rng.randbytes(size))
        record = agg.clear_and_get()
        datas.append(record.get_contents()[2])
    return make_body(aggregates, 0, datas=datas)


def bodies() -> dict[str, bytes]:
    out = {f"{size:,} B x {n:,}": make_body(n, size) for size, n in SIZES}
    try:
        out[f"KPL {KPL[0]} x {KPL[1]} x {KPL[2]} B"] = kpl_body()
    except ImportError:
        print("KPL body: aws_kinesis_agg not installed")
    return out


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def interleaved(repeat: int, paths: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Best CPU seconds of each path over ``repeat`` rounds, every path once per round."""
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(repeat):
        for name, fn in paths.items():
            best[name] = min(best[name], best_of(1, fn))
    return best


# -- the candidate decoders: body -> RecordPage -------------------------------------------------------


def _page(records: list[Any], get: Callable[[str], Callable[[Any], Any]], data: list[bytes], doc: Any) -> Any:
    from kinesis_src.records import RecordPage

    def column(key: str) -> list[Any]:
        return list(map(get(key), records))

    return RecordPage(
        partition_keys=column("PartitionKey"), data=data, sequence_numbers=column("SequenceNumber"),
        arrival_epoch=column("ApproximateArrivalTimestamp"), encryption_types=column("EncryptionType"),
        next_iterator=doc.get("NextShardIterator"), millis_behind_latest=doc.get("MillisBehindLatest"),
    )


def _dict_get(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda record: record.get(key)


def json_binascii(body: bytes) -> Any:
    doc = json.loads(body)
    records = doc["Records"]
    return _page(records, _dict_get, list(map(binascii.a2b_base64, map(itemgetter("Data"), records))), doc)


def candidates() -> dict[str, Callable[[bytes], Any] | str]:
    """Every decoder, or why it is absent."""
    found: dict[str, Callable[[bytes], Any] | str] = {"msgspec (kinesis-src)": _msgspec()}
    found["msgspec + pybase64"] = _msgspec_pybase64()
    found["pysimdjson + pybase64"] = _simdjson()
    found["orjson + pybase64"] = _orjson()
    found["json + binascii (oracle)"] = json_binascii
    found["numpy cut"] = _numpy_cut()
    return found


def _msgspec() -> Callable[[bytes], Any] | str:
    try:
        from kinesis_src.aws.body_decode import decode_get_records
    except ImportError:
        return "not in this tree"
    return decode_get_records


try:
    import msgspec

    class _StrRecord(msgspec.Struct, rename="pascal", gc=False):
        """A record with ``Data`` left as its base64 text."""

        sequence_number: str
        data: str
        partition_key: str | None = None
        approximate_arrival_timestamp: float | None = None
        encryption_type: str | None = None

    class _StrBody(msgspec.Struct, rename="pascal", gc=False):
        records: list[_StrRecord]
        next_shard_iterator: str | None = None
        millis_behind_latest: int | None = None
except ImportError:
    pass


def _msgspec_pybase64() -> Callable[[bytes], Any] | str:
    try:
        import msgspec
        import pybase64
    except ImportError:
        return "not installed"
    decoder, b64 = msgspec.json.Decoder(_StrBody), pybase64.b64decode
    from operator import attrgetter

    def names(key: str) -> Callable[[Any], Any]:
        return attrgetter("".join("_" + c.lower() if c.isupper() else c for c in key).lstrip("_"))

    def decode(body: bytes) -> Any:
        doc = decoder.decode(body)
        data = [b64(r.data, validate=True) for r in doc.records]
        outer = {"NextShardIterator": doc.next_shard_iterator, "MillisBehindLatest": doc.millis_behind_latest}
        return _page(doc.records, names, data, outer)

    return decode


def _simdjson() -> Callable[[bytes], Any] | str:
    try:
        import pybase64
        import simdjson
    except ImportError:
        return "not installed"
    parser, b64 = simdjson.Parser(), pybase64.b64decode

    def decode(body: bytes) -> Any:
        doc = parser.parse(body)
        records = doc["Records"].as_list()
        data = [b64(r["Data"], validate=True) for r in records]
        outer = {"NextShardIterator": doc.get("NextShardIterator"), "MillisBehindLatest": doc.get("MillisBehindLatest")}
        return _page(records, _dict_get, data, outer)

    return decode


def _orjson() -> Callable[[bytes], Any] | str:
    try:
        import orjson
        import pybase64
    except ImportError:
        return "not installed"
    b64 = pybase64.b64decode

    def decode(body: bytes) -> Any:
        doc = orjson.loads(body)
        records = doc["Records"]
        return _page(records, _dict_get, [b64(r["Data"], validate=True) for r in records], doc)

    return decode


def _numpy_cut() -> Callable[[bytes], Any] | str:
    try:
        from kinesis_src.aws.plain_body import cut_page  # type: ignore[import-not-found]
    except ImportError:
        return "not in this tree (--before REV times it)"
    return cut_page


# -- what each page becomes -----------------------------------------------------------------------------


def outputs(decode: Callable[[bytes], Any], body: bytes) -> dict[str, Callable[[], object]]:
    from kinesis_src.arrow import page_to_arrow
    from kinesis_src.retrieval.aggregation import deaggregate

    def records() -> object:
        return deaggregate(decode(body)).page.records(SHARD, "s")

    def arrow() -> object:
        return page_to_arrow(deaggregate(decode(body)).page, "s", SHARD)

    return {"page": lambda: decode(body), "Records": records, "Arrow": arrow}


def page_fields(page: Any) -> dict[str, Any]:
    from kinesis_src.records import RecordPage

    return {f.name: getattr(page, f.name) for f in fields(RecordPage) if f.name != "child_shards"}


def measure(repeat: int, only: set[str] | None = None) -> dict[str, dict[str, float | str]]:
    """{body name: {"decoder / output": seconds, or why absent}}."""
    results: dict[str, dict[str, float | str]] = {}
    found = {name: fn for name, fn in candidates().items() if only is None or name in only}
    for body_name, body in bodies().items():
        expected = page_fields(json_binascii(body))
        paths: dict[str, Callable[[], object]] = {}
        row: dict[str, float | str] = {}
        for name, decode in found.items():
            if isinstance(decode, str):
                row[name] = decode
                continue
            assert page_fields(decode(body)) == expected, f"{name} disagrees with the oracle on {body_name}"
            paths.update({f"{name} / {out}": fn for out, fn in outputs(decode, body).items()})
        if only is None and body_name.startswith("200 B"):
            paths["botocore parser / page"] = _botocore(body)
        row.update(interleaved(repeat, paths))
        results[body_name] = row
    return results


def _botocore(body: bytes) -> Callable[[], object]:
    import botocore.session
    from botocore import parsers

    shape = botocore.session.get_session().get_service_model("kinesis").operation_model("GetRecords").output_shape
    parser = parsers.create_parser("json")
    return lambda: parser.parse({"body": body, "headers": {}, "status_code": 200}, shape)


def before(rev: str, repeat: int) -> dict[str, dict[str, float | str]]:
    """The numpy cut of revision ``rev``, timed in a child process whose kinesis_src is that revision's."""
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tree:
        archive = subprocess.run(["git", "archive", rev, "kinesis_src"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tree}
        out = subprocess.run(
            [sys.executable, __file__, "--child-cut", "--repeat", str(repeat)],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
    return json.loads(out.splitlines()[-1])


def print_table(results: dict[str, dict[str, float | str]]) -> None:
    for body_name, row in results.items():
        n = _records(body_name)
        print(f"\n{body_name}  (us per record; x = time / msgspec's)")
        base = {out: row.get(f"msgspec (kinesis-src) / {out}") for out in ("page", "Records", "Arrow")}
        names = list(dict.fromkeys(key.split(" / ")[0] for key in row))
        print(f"  {'decoder':<30}" + "".join(f"{out:>18}" for out in ("page", "Records", "Arrow")))
        for name in names:
            if isinstance(row.get(name), str):
                print(f"  {name:<30}  {row[name]}")
                continue
            cells = []
            for out in ("page", "Records", "Arrow"):
                seconds, ref = row.get(f"{name} / {out}"), base[out]
                if not isinstance(seconds, float):
                    cells.append(f"{'-':>18}")
                    continue
                ratio = f" ({seconds / ref:4.1f}x)" if isinstance(ref, float) else ""
                cells.append(f"{seconds / n * 1e6:>11.3f}{ratio:>7}")
            print(f"  {name:<30}" + "".join(cells))


def _records(body_name: str) -> int:
    if body_name.startswith("KPL"):
        return KPL[0] * KPL[1]  # user records
    return int(body_name.split(" x ")[1].replace(",", ""))


def task_profile(records: int, repeat: int) -> None:
    """One Spark task's read of a whole shard in this process: CPU per record, then cProfile's top 25."""
    import cProfile
    import pstats

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from replay_endpoint import ReplayEndpoint, shard_id

    from kinesis_src.positions import Position
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice
    from kinesis_src.spark.tasks import read_partition

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with ReplayEndpoint(shards=1, records_per_shard=records, size=200, mode="process") as ep:
        endpoint = Endpoint("us-east-1", ep.endpoint_url, None)
        start = Position.trim_horizon().to_dict()
        partition = KinesisPartition(0, ep.stream_name, endpoint, (ShardSlice(shard_id(0), start),), fetch_interval_ms=0)

        def read() -> None:
            rows = sum(batch.num_rows for batch in read_partition(partition))
            assert rows == records, rows

        read()  # warm-up: connection, imports
        seconds = best_of(repeat, read)
        print(f"one task's read of {records:,} records x 200 B in-process: {seconds / records * 1e6:.2f} us/record "
              f"CPU (best of {repeat}, load {os.getloadavg()[0]:.1f})")
        profile = cProfile.Profile()
        profile.runcall(read)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--task", action="store_true", help="one Spark task's read in-process, profiled")
    parser.add_argument("--records", type=int, default=100_000, help="with --task: records in the shard")
    parser.add_argument("--before", metavar="REV", help="also time the numpy cut of git revision REV")
    parser.add_argument("--child-cut", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.task:
        task_profile(opts.records, opts.repeat)
        return
    if opts.child_cut:
        print(json.dumps(measure(opts.repeat, only={"numpy cut", "json + binascii (oracle)"})))
        return
    load = os.getloadavg()[0]
    results = measure(opts.repeat)
    if opts.before:
        for body_name, row in before(opts.before, opts.repeat).items():
            for key, value in row.items():
                if key.startswith("numpy cut"):
                    results[body_name][key.replace("numpy cut", f"numpy cut ({opts.before})")] = value
                    results[body_name].pop("numpy cut", None)
                elif key.startswith("json + binascii"):  # the same decoder in the child: how far apart the two runs are
                    results[body_name][key.replace("(oracle)", f"({opts.before} process)")] = value
    print(f"best of {opts.repeat} interleaved rounds, CPU time, load {load:.1f} at the start, Python "
          f"{sys.version.split()[0]}")
    print_table(results)


if __name__ == "__main__":
    main()
