"""KPL de-aggregation cost per user record: kinesis-src (protobuf's upb), a hand-written decoder, aws_kinesis_agg.

Run: .venv/bin/python benchmarks/bench_kpl.py [--aggregates 1000] [--users 100] [--size 100] [--repeat 5]
     [--before REV]

One page of A aggregates of U user records of S bytes each (1000 x 100 x
100 B is about 10.5 MB: one full GetRecords page), built with
``aws_kinesis_agg``'s RecordAggregator, de-aggregated on one core; the best
of ``--repeat`` interleaved runs of each path, in nanoseconds per user record:

- kinesis-src: ``kinesis_src.retrieval.aggregation.deaggregate``
  (protobuf's C runtime, upb, parses each aggregate), RecordPage in and out;
- hand-written: the same ``deaggregate`` with the hand-written protobuf
  reader of git revision ``--before`` (default 710a245, the last that had
  it), loaded from that revision's ``aggregation.py``;
- aws_kinesis_agg: ``deaggregator.iter_deaggregate_records(..., data_format="Boto3")``,
  raw bytes in (no base64 input step), its Lambda-style dicts out (it
  re-encodes each user record's data as base64: that is part of its cost).

Then a page of 10,000 plain records of 200 B: the cost of the prefix check
that finds no aggregate (the page is returned as is), per record and as a
share of the GetRecords decode of the same page
(``kinesis_src.aws.body_decode.decode_get_records``, see bench_decode.py).
"""

from __future__ import annotations

import argparse
import base64
import json
import os

import subprocess
import sys
import types

from aws_kinesis_agg import deaggregator
from aws_kinesis_agg.aggregator import RecordAggregator

from bench_decode import best_of  # benchmarks/ is on sys.path when run as a script

from kinesis_src.aws.body_decode import decode_get_records
from kinesis_src.records import RecordPage
from kinesis_src.retrieval import aggregation
from kinesis_src.retrieval.aggregation import AGGREGATE_MAGIC, deaggregate

PLAIN_RECORDS, PLAIN_SIZE = 10_000, 200


def aggregate(i: int, users: int, size: int) -> bytes:
    agg = RecordAggregator()
    for j in range(users):
        agg.add_user_record(f"key-{i}-{j % 10}", os.urandom(size))
    record = agg.clear_and_get()
    assert record is not None
    return record.get_contents()[2]


def page(datas: list[bytes]) -> RecordPage:
    n = len(datas)
    return RecordPage(
        partition_keys=[f"p{i}" for i in range(n)],
        data=datas,
        sequence_numbers=[str(49_590_000_000_000_000_000_000_000_000_000_000_000_000_000 + i) for i in range(n)],
        arrival_epoch=[1.7e9 + i / 1000 for i in range(n)],
        encryption_types=[None] * n,
        next_iterator="A" * 200,
        millis_behind_latest=0,
    )


def hand_written(rev: str) -> types.ModuleType:
    """``kinesis_src/retrieval/aggregation.py`` of git revision ``rev``, as a module beside today's."""
    source = subprocess.run(["git", "show", f"{rev}:kinesis_src/retrieval/aggregation.py"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("kinesis_src.retrieval.aggregation_before")
    module.__package__ = "kinesis_src.retrieval"
    sys.modules[module.__name__] = module  # its dataclasses look their module up
    exec(compile(source, f"{rev}:aggregation.py", "exec"), module.__dict__)
    return module


def with_decoder(raw: RecordPage, decode: object) -> RecordPage:
    """``deaggregate`` with its per-aggregate decoder swapped for ``decode``: only the decoder differs."""
    mine = aggregation._decode
    aggregation._decode = decode
    try:
        return deaggregate(raw).page
    finally:
        aggregation._decode = mine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default="710a245", help="the git revision whose hand-written decoder is timed")
    args = parser.parse_args()
    try:
        old_decode = hand_written(args.before)._decode
    except (OSError, subprocess.CalledProcessError):  # no git, or no such revision
        print(f"hand-written decoder of {args.before}: not available (needs this repository's git history)")
        old_decode = None

    datas = [aggregate(i, args.users, args.size) for i in range(args.aggregates)]
    agg_page = page(datas)
    users = args.aggregates * args.users
    boto3_records = [
        {"Data": d, "PartitionKey": k, "SequenceNumber": s, "ApproximateArrivalTimestamp": t}
        for d, k, s, t in zip(agg_page.data, agg_page.partition_keys, agg_page.sequence_numbers, agg_page.arrival_epoch)
    ]
    # all three read the same user records
    ours_page = deaggregate(agg_page).page
    theirs = list(deaggregator.iter_deaggregate_records(boto3_records, data_format="Boto3"))
    assert len(ours_page) == len(theirs) == users
    assert ours_page.data == [base64.b64decode(r["kinesis"]["data"]) for r in theirs]
    if old_decode is not None:
        assert ours_page == with_decoder(agg_page, old_decode)

    # interleaved rounds, best of each: other load on the machine hits all three alike
    ours = ref = old = float("inf")
    for _ in range(args.repeat):
        ours = min(ours, best_of(1, lambda: deaggregate(agg_page)))
        ref = min(ref, best_of(1, lambda: list(deaggregator.iter_deaggregate_records(boto3_records, data_format="Boto3"))))
        if old_decode is not None:
            old = min(old, best_of(1, lambda: with_decoder(agg_page, old_decode)))
    mb = sum(map(len, datas)) / 1e6
    print(f"{args.aggregates} aggregates x {args.users} user records of {args.size} B "
          f"({users:,} user records, {mb:.1f} MB), best of {args.repeat}:")
    print(f"  kinesis-src (upb)             {ours / users * 1e9:7.0f} ns/user record  {users / ours:>10,.0f} user records/s")
    if old_decode is not None:
        print(f"  hand-written decoder of {args.before:<7} {old / users * 1e9:5.0f} ns/user record  "
              f"{users / old:>10,.0f} user records/s  ({old / ours:.2f}x ours)")
    print(f"  aws_kinesis_agg deaggregator  {ref / users * 1e9:7.0f} ns/user record  {users / ref:>10,.0f} user records/s"
          f"  ({ref / ours:.1f}x ours)")

    plain = [os.urandom(PLAIN_SIZE) for _ in range(PLAIN_RECORDS)]
    plain = [b"\x00" + d[1:] if d[:4] == AGGREGATE_MAGIC else d for d in plain]
    plain_page = page(plain)
    body = json.dumps({
        "Records": [
            {"SequenceNumber": s, "ApproximateArrivalTimestamp": t, "Data": base64.b64encode(d).decode(), "PartitionKey": k}
            for d, k, s, t in zip(plain, plain_page.partition_keys, plain_page.sequence_numbers, plain_page.arrival_epoch)
        ],
        "NextShardIterator": "A" * 200,
        "MillisBehindLatest": 0,
    }).encode()
    assert deaggregate(plain_page).page is plain_page
    check = best_of(args.repeat * 4, lambda: deaggregate(plain_page))
    decode = best_of(args.repeat * 4, lambda: decode_get_records(body))
    print(f"plain page of {PLAIN_RECORDS:,} records of {PLAIN_SIZE} B (no aggregate: the same page comes back):")
    print(f"  prefix check                 {check / PLAIN_RECORDS * 1e9:7.1f} ns/record  "
          f"({check * 1e3:.2f} ms per page; {check / decode:.1%} of the GetRecords decode, "
          f"{decode / PLAIN_RECORDS * 1e9:.0f} ns/record)")


if __name__ == "__main__":
    main()
