"""Per-record cost of decoding GetRecords bodies: botocore's parser vs the fast path.

Run: .venv/bin/python benchmarks/bench_decode.py [--records 10000] [--size 200] [--repeat 7]

One body of N records of S random bytes each (what a full GetRecords call
returns), decoded repeatedly on one core; the best run of each path is
reported, in records/s and microseconds per record:

- botocore: the stock JSON parser on the service model (what boto3 does);
- fast parser: kinesis-src's parser hook as botocore calls it (decode +
  response metadata), i.e. what ``KinesisClient.get_records`` costs;
- fast + Record objects: the above plus building one ``Record`` per record
  (the Python consumer's view);
- fast + Arrow: the above plus building the Spark source's Arrow batch columns;
- Spark task, reference: what a Spark task did per page before the Arrow
  decoder (the fast parser's page, then ``page_to_arrow`` of its lists);
- Spark task, pyarrow.json: ``kinesis_src.aws.arrow_decode``'s parsing path
  (pyarrow.json, numpy base64, the page's own Arrow columns), then
  ``page_to_arrow``;
- Spark task, layout cut: what tasks do now for a body of a service's own
  layout (``kinesis_src/aws/plain_body.py``: no JSON parser), then
  ``page_to_arrow``; followed by the parts (the cut alone, pyarrow.json
  alone, base64 with numpy and with ``a2b_base64`` per record) and
  ``json.loads`` alone for comparison.

``--task`` measures instead one Spark task's read of a whole shard
in-process (``kinesis_src.spark.tasks.read_partition``: HTTP, decode, cursor,
Arrow batches; no Spark) against ``benchmarks/replay_endpoint.py`` in its own
process, ``--records`` records per shard: with the reference reading
(botocore's chunked body read, ``json.loads``), with the Arrow decoder, with the Arrow decoder and one body read, and
with bodies of Kinesis's layout cut without a JSON parser
(``kinesis_src/aws/plain_body.py``: what tasks do now).

Times are CPU time of this process (``time.process_time``), the best of
``--repeat`` rounds, the paths interleaved round by round, so that other
jobs on a shared machine disturb every path alike.

Measured on this project's 2-core CI machine (Python 3.11, 10,000 x 200 B):
see the closing note of the foundation issue and README "Performance".
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import time
from typing import Callable

import botocore.session
from botocore import parsers

from kinesis_src.arrow import page_to_arrow
from kinesis_src.aws import arrow_decode
from kinesis_src.aws.arrow_decode import (
    decode_base64,
    decode_get_records_arrow,
    parse_body,
)
from kinesis_src.aws.decode import (
    FastGetRecordsParser,
    decode_get_records,
    page_as_botocore,
)
from kinesis_src.aws.plain_body import cut_body


def make_body(records: int, size: int) -> bytes:
    now = time.time()
    recs = [
        {
            "SequenceNumber": str(49_590_000_000_000_000_000_000_000_000_000_000_000_000_000 + i),
            "ApproximateArrivalTimestamp": round(now + i / 1000, 3),
            "Data": base64.b64encode(os.urandom(size)).decode(),
            "PartitionKey": f"key-{i % 97}",
        }
        for i in range(records)
    ]
    body = {"Records": recs, "NextShardIterator": "A" * 200, "MillisBehindLatest": 0}
    return json.dumps(body, separators=(",", ":")).encode()  # compact, as services write it


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


def to_arrow(page) -> object:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [
            pa.array(page.partition_keys, pa.string()),
            pa.array(page.data, pa.binary()),
            pa.array(page.sequence_numbers, pa.string()),
            pa.array([round(t * 1_000_000) for t in page.arrival_epoch], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        ],
        names=["partitionKey", "data", "sequenceNumber", "approximateArrivalTimestamp"],
    )


def task_read(records: int, size: int, repeat: int) -> None:
    """CPU per record of one task's read, three ways, interleaved round by round."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from replay_endpoint import ReplayEndpoint, shard_id

    from kinesis_src.aws.arrow_decode import use_arrow_parser
    from kinesis_src.aws.decode import FastResponseParserFactory
    from kinesis_src.aws.whole_body import WholeBodySession, read_bodies_whole
    from kinesis_src.positions import Position
    from kinesis_src.spark.partitions import Endpoint, KinesisPartition, ShardSlice
    from kinesis_src.spark.tasks import kinesis_client, read_partition

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with ReplayEndpoint(shards=1, records_per_shard=records, size=size, mode="process") as ep:
        endpoint = Endpoint("us-east-1", ep.endpoint_url, None)
        start = Position.trim_horizon().to_dict()
        partition = KinesisPartition(0, ep.stream_name, endpoint, (ShardSlice(shard_id(0), start),), fetch_interval_ms=0)
        client = kinesis_client(endpoint).botocore_client
        whole, chunked = client._endpoint.http_session, client._endpoint.http_session
        if isinstance(whole, WholeBodySession):
            chunked = whole.inner

        from kinesis_src.aws import arrow_decode

        cut = arrow_decode._cut

        def not_cut(body: bytes) -> None:
            raise arrow_decode.NotThisLayout("measuring the pyarrow.json path")

        def setup(arrow: bool, one_read: bool, layout_cut: bool = True) -> None:
            arrow_decode._cut = cut if layout_cut else not_cut
            client._endpoint._response_parser_factory = FastResponseParserFactory()
            if arrow:
                use_arrow_parser(client)
            client._endpoint.http_session = chunked
            if one_read:
                read_bodies_whole(client)

        def read(arrow: bool, one_read: bool, layout_cut: bool = True) -> Callable[[], object]:
            def run() -> None:
                setup(arrow, one_read, layout_cut)
                rows = sum(batch.num_rows for batch in read_partition(partition))
                assert rows == records, rows

            return run

        paths = {
            "task read, reference": read(False, False),
            "task read, Arrow decode": read(True, False),
            "  + one body read": read(True, True, layout_cut=False),
            "  + layout cut (now)": read(True, True),
        }
        read(True, True)()  # warm-up: connection, imports
        load = os.getloadavg()[0]
        print(f"one task's read of {records:,} records x {size} B, in-process, best of {repeat} interleaved rounds, "
              f"CPU time, load {load:.1f}")
        print(f"{'path':<28}{'s':>10}{'us/record':>11}")
        baseline = None
        for name, seconds in interleaved(repeat, paths).items():
            baseline = baseline or seconds
            print(f"{name:<28}{seconds:>10.2f}{seconds / records * 1e6:>11.2f}  ({baseline / seconds:.2f}x)")


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--records", type=int, default=10_000)
    args.add_argument("--size", type=int, default=200)
    args.add_argument("--repeat", type=int, default=7)
    args.add_argument("--task", action="store_true", help="one Spark task's read in-process, three ways")
    opts = args.parse_args()
    if opts.task:
        task_read(opts.records, opts.size, opts.repeat)
        return

    body = make_body(opts.records, opts.size)
    shape = botocore.session.get_session().get_service_model("kinesis").operation_model("GetRecords").output_shape
    response = {"body": body, "headers": {}, "status_code": 200}
    stock = parsers.create_parser("json")
    fast = FastGetRecordsParser()

    # Same answer first: a benchmark of two paths that disagree would be meaningless.
    expected = stock.parse(response, shape)
    expected.pop("ResponseMetadata")
    assert page_as_botocore(decode_get_records(body)) == expected, "fast path disagrees with botocore"

    arrow_page = decode_get_records_arrow(body)
    assert page_to_arrow(arrow_page, "s", "x").equals(page_to_arrow(decode_get_records(body), "s", "x"))
    data = parse_body(body).column("Records").chunk(0).flatten().field("Data")
    encoded = data.to_pylist()
    paths: dict[str, Callable[[], object]] = {
        "botocore parser": lambda: stock.parse(response, shape),
        "fast parser (kinesis-src)": lambda: fast.parse(response, shape),
        "fast + Record objects": lambda: list(decode_get_records(body).records("shardId-000000000000")),
        "fast + Arrow batch": lambda: to_arrow(decode_get_records(body)),
        "Spark task, reference": lambda: page_to_arrow(decode_get_records(body), "s", "shardId-000000000000"),
        "Spark task, pyarrow.json": lambda: page_to_arrow(arrow_decode._decode(body), "s", "shardId-000000000000"),
        "Spark task, layout cut": lambda: page_to_arrow(decode_get_records_arrow(body), "s", "shardId-000000000000"),
        "  layout cut alone": lambda: cut_body(body),
        "  pyarrow.json alone": lambda: parse_body(body),
        "  base64, numpy": lambda: decode_base64(data),
        "  base64, a2b_base64 each": lambda: list(map(binascii.a2b_base64, encoded)),
        "  json.loads alone": lambda: json.loads(body),
    }
    load = os.getloadavg()[0]
    print(
        f"GetRecords body: {opts.records} records x {opts.size} B = {len(body) / 1e6:.1f} MB, "
        f"best of {opts.repeat} interleaved rounds, CPU time, load {load:.1f}"
    )
    print(f"{'path':<28}{'ms/body':>10}{'us/record':>11}{'records/s':>13}")
    baseline = None
    for name, seconds in interleaved(opts.repeat, paths).items():
        rate = opts.records / seconds
        baseline = baseline or seconds
        print(f"{name:<28}{seconds * 1e3:>10.1f}{seconds / opts.records * 1e6:>11.2f}{rate:>13,.0f}  ({baseline / seconds:.1f}x)")


if __name__ == "__main__":
    main()
