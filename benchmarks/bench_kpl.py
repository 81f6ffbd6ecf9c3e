"""KPL de-aggregation cost per user record: our hand-written decoder vs aws_kinesis_agg's deaggregator.

Also the cost a plain (non-aggregated) page pays: one 4-byte prefix check per
record, next to the fast GetRecords decode of the same records.

    .venv/bin/python benchmarks/bench_kpl.py
"""

from __future__ import annotations

import base64
import json
import time

from aws_kinesis_agg import deaggregator
from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_src.aws.decode import decode_get_records
from kinesis_src.records import RecordPage
from kinesis_src.retrieval.aggregation import deaggregate

AGGREGATES, PER_AGGREGATE, SIZE, PLAIN = 200, 100, 100, 10_000


def aggregate(i: int) -> bytes:
    agg = RecordAggregator()
    for j in range(PER_AGGREGATE):
        agg.add_user_record(f"key-{i}-{j % 10}", bytes([j % 256]) * SIZE)
    return agg.clear_and_get().get_contents()[2]


def page(datas: list[bytes]) -> RecordPage:
    n = len(datas)
    return RecordPage([f"p{i}" for i in range(n)], datas, [str(10**20 + i) for i in range(n)],
                      [1.7e9] * n, [None] * n, "it", 0)


def best(fn, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    datas = [aggregate(i) for i in range(AGGREGATES)]
    agg_page = page(datas)
    users = AGGREGATES * PER_AGGREGATE
    events = [{"kinesis": {"data": base64.b64encode(d).decode(), "partitionKey": "p", "sequenceNumber": str(i),
                           "approximateArrivalTimestamp": 1.0, "kinesisSchemaVersion": "1.0"}} for i, d in enumerate(datas)]
    ours = best(lambda: deaggregate(agg_page))
    ref = best(lambda: deaggregator.deaggregate_records(events))
    # the reference also base64-decodes its input: subtract that share for a fair per-record figure
    b64 = best(lambda: [base64.b64decode(e["kinesis"]["data"]) for e in events])
    print(f"{AGGREGATES} aggregates x {PER_AGGREGATE} user records of {SIZE} B ({users} user records)")
    print(f"  kinesis-src decoder   {ours / users * 1e9:8.0f} ns/user record")
    print(f"  aws_kinesis_agg       {(ref - b64) / users * 1e9:8.0f} ns/user record  ({(ref - b64) / ours:.1f}x ours)")
    plain = [b"x" * 200] * PLAIN
    plain_page = page(plain)
    body = json.dumps({"Records": [{"Data": base64.b64encode(d).decode(), "PartitionKey": "p",
                                    "SequenceNumber": str(10**20 + i), "ApproximateArrivalTimestamp": 1.7e9}
                                   for i, d in enumerate(plain)], "NextShardIterator": "it", "MillisBehindLatest": 0})
    check = best(lambda: deaggregate(plain_page))
    decode = best(lambda: decode_get_records(body))
    print(f"plain page of {PLAIN} records of 200 B")
    print(f"  prefix check          {check / PLAIN * 1e9:8.0f} ns/record  ({check / decode:.1%} of the fast GetRecords decode)")


if __name__ == "__main__":
    main()
