"""KPL de-aggregation cost per user record, hand-written decoder vs aws_kinesis_agg, and what plain pages pay.

Run: .venv/bin/python benchmarks/bench_kpl.py [--aggregates 1000] [--users 100] [--size 100] [--repeat 5]

One page of A aggregates of U user records of S bytes each (1000 x 100 x
100 B is about 10.5 MB: one full GetRecords page), built with
``aws_kinesis_agg``'s RecordAggregator, de-aggregated on one core; the best
of ``--repeat`` runs of each path, in nanoseconds per user record:

- kinesis-src: ``kinesis_src.retrieval.aggregation.deaggregate`` (the
  hand-written decoder), RecordPage in, RecordPage out;
- aws_kinesis_agg: ``deaggregator.iter_deaggregate_records(..., data_format="Boto3")``,
  raw bytes in (no base64 input step), its Lambda-style dicts out (it
  re-encodes each user record's data as base64: that is part of its cost);
- kinesis-src with protobuf: the same ``deaggregate`` with its decoder
  swapped for ``messages_pb2.AggregatedRecord.ParseFromString`` (protobuf's
  C runtime, upb): what a "library" path would cost without
  aws_kinesis_agg's dicts and base64.

Then a page of 10,000 plain records of 200 B: the cost of the prefix check
that finds no aggregate (the page is returned as is), per record and as a
share of the fast GetRecords decode of the same page
(``kinesis_src.aws.decode.decode_get_records``, see bench_decode.py).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os

from aws_kinesis_agg import deaggregator, messages_pb2
from aws_kinesis_agg.aggregator import RecordAggregator

from bench_decode import best_of  # benchmarks/ is on sys.path when run as a script

from kinesis_src.aws.decode import decode_get_records
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


def protobuf_decode(data: bytes) -> tuple[list[str], list[str | None] | None, list[bytes]]:
    """The library path's decoder: MD5, then protobuf's C runtime (upb) parses ``AggregatedRecord``;
    same result as kinesis-src's hand-written ``_decode`` (malformed handling left out)."""
    body = memoryview(data)[4:-16]
    if hashlib.md5(body).digest() != data[-16:]:
        raise ValueError("MD5")
    message = messages_pb2.AggregatedRecord()
    message.ParseFromString(body)
    pks, ehks = list(message.partition_key_table), list(message.explicit_hash_key_table)
    keys: list[str] = []
    hash_keys: list[str | None] = []
    payloads: list[bytes] = []
    for record in message.records:
        keys.append(pks[record.partition_key_index])
        hash_keys.append(ehks[record.explicit_hash_key_index] if record.HasField("explicit_hash_key_index") else None)
        payloads.append(record.data)
    return keys, hash_keys, payloads


def with_protobuf(raw: RecordPage) -> RecordPage:
    """``deaggregate`` with its decoder swapped for :func:`protobuf_decode`: only the decoder differs."""
    mine = aggregation._decode
    aggregation._decode = protobuf_decode
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
    args = parser.parse_args()

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
    assert ours_page.data == [base64.b64decode(r["kinesis"]["data"]) for r in theirs] == with_protobuf(agg_page).data
    assert ours_page == with_protobuf(agg_page)

    # interleaved rounds, best of each: other load on the machine hits all three alike
    ours = ref = floor = float("inf")
    for _ in range(args.repeat):
        ours = min(ours, best_of(1, lambda: deaggregate(agg_page)))
        ref = min(ref, best_of(1, lambda: list(deaggregator.iter_deaggregate_records(boto3_records, data_format="Boto3"))))
        floor = min(floor, best_of(1, lambda: with_protobuf(agg_page)))
    mb = sum(map(len, datas)) / 1e6
    print(f"{args.aggregates} aggregates x {args.users} user records of {args.size} B "
          f"({users:,} user records, {mb:.1f} MB), best of {args.repeat}:")
    print(f"  kinesis-src (hand-written)   {ours / users * 1e9:7.0f} ns/user record  {users / ours:>10,.0f} user records/s")
    print(f"  aws_kinesis_agg deaggregator {ref / users * 1e9:7.0f} ns/user record  {users / ref:>10,.0f} user records/s"
          f"  ({ref / ours:.1f}x ours)")
    print(f"  kinesis-src with upb decoder {floor / users * 1e9:7.0f} ns/user record  {users / floor:>10,.0f} user records/s"
          f"  ({floor / ours:.1f}x ours)")

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
          f"({check * 1e3:.2f} ms per page; {check / decode:.1%} of the fast GetRecords decode, "
          f"{decode / PLAIN_RECORDS * 1e9:.0f} ns/record)")


if __name__ == "__main__":
    main()
