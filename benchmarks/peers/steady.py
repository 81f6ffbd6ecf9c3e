"""Latency and DynamoDB cost at a steady low rate, one worker per peer.

A fresh 4-shard kinesis-mock stream and one worker; DynamoDB calls go
through a counting proxy (ddb_proxy.py). Once the worker has delivered its
first record, the producer puts one round of 50 keyed-counter records every
second for ``WINDOW_S`` seconds. Reported: put-to-process latency p50 and
p95 (from just before the PutRecords call to the delivery line, same
clock), DynamoDB requests per shard-minute over the window (the work a
lease table costs while the stream is steady), and the worker's CPU
seconds per minute over the window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import deliveries
from ddb_proxy import CountingProxy
from peers import Peer, start_worker
from procstat import Sampler
from scenario import KEYS, each_peer, fresh_stream
from torture import wait_first

WINDOW_S = 60.0
ROUND_S = 1.0
SHARDS = 4


@dataclass(frozen=True)
class SteadyResult:
    peer: str
    records: int = 0
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    ddb_per_shard_minute: float | None = None
    ddb_by_operation: dict = field(default_factory=dict)
    ddb_capacity_per_shard_minute: float | None = None
    cpu_s_per_minute: float | None = None
    note: str = ""


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_one(peer: Peer, emulators, kinesis, give_up_s: float, keep: Path | None) -> SteadyResult:  # noqa: ANN001
    from kinesis_src.testing.producer import encode

    fresh = fresh_stream(kinesis, "steady", SHARDS, keep)
    producer, sink = fresh.producer, fresh.sink
    with CountingProxy(emulators.dynamodb_endpoint) as proxy:
        worker = start_worker(peer, "w1", stream=fresh.stream, app=fresh.app, kinesis=emulators.kinesis_endpoint,
                              dynamodb=proxy.url, sink=sink)
        sampler = Sampler(worker.process.pid)
        try:
            if not wait_first(sink, {"w1": worker}, give_up_s):
                return SteadyResult(peer.name, note=f"no record delivered within {give_up_s:.0f} s (log: {worker.log})")
            put_at: dict[str, float] = {}
            start, cpu0 = time.time(), sampler.sample().cpu_s
            while time.time() < start + WINDOW_S:
                t = time.time()
                following = {k: producer.counters.get(k, 0) + 1 for k in producer.key_names()}
                for k, n in following.items():
                    put_at[encode(k, n).decode()] = t
                producer.put_round()
                time.sleep(max(0.0, t + ROUND_S - time.time()))
            end, cpu1 = time.time(), sampler.sample().cpu_s
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and deliveries.count(sink) < KEYS + len(put_at):
                time.sleep(0.5)
            calls = proxy.count(start, end)
            capacity = proxy.capacity_units(start, end)
        finally:
            sampler.stop()
            worker.terminate(20)
    got = {}
    for d in deliveries.read(sink):
        got.setdefault(d.head, d.at)
    latencies = [(got[h] - t) * 1000 for h, t in put_at.items() if h in got]
    minutes = (end - start) / 60
    missing = len(put_at) - len(latencies)
    return SteadyResult(
        peer.name, records=len(latencies), latency_p50_ms=percentile(latencies, 0.50),
        latency_p95_ms=percentile(latencies, 0.95), ddb_per_shard_minute=sum(calls.values()) / SHARDS / minutes,
        ddb_by_operation=calls, ddb_capacity_per_shard_minute=capacity / SHARDS / minutes, cpu_s_per_minute=(cpu1 - cpu0) / minutes,
        note=f"{missing} of {len(put_at)} records not delivered within 30 s of the window's end" if missing else "",
    )


def run_all(peers: list[Peer], emulators, opts, log) -> dict:  # noqa: ANN001
    return {"shards": SHARDS, "window_s": WINDOW_S, "rate": KEYS / ROUND_S,
            "results": each_peer("steady", run_one, peers, emulators, opts, log)}
