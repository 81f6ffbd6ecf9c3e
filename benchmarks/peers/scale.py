"""Graceful scale-in and scale-out: a worker stopped with SIGTERM, then one added, under steady load.

A fresh 4-shard kinesis-mock stream, two workers (w1, w2). Once the first
record is delivered, the producer puts one round of 50 keyed-counter
records every second for ``PRODUCE_S`` seconds; at ``STOP_AT_S`` w1 gets
SIGTERM (the peer's own graceful shutdown; SIGKILL after ``GRACE_S``), and
at ``ADD_AT_S`` w3 starts. Reported: records delivered more than once
(a graceful hand-off should redeliver nothing), records missing, whether w1
exited by itself, and the longest pause in delivery of any key after each
event beyond the 1 s the producer leaves between a key's records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import deliveries
from peers import Peer, start_worker
from scenario import each_peer, fresh_stream
from torture import key_of, sleep_until, wait_first

PRODUCE_S = 80.0
STOP_AT_S = 20.0
ADD_AT_S = 45.0
GRACE_S = 30.0


@dataclass(frozen=True)
class ScaleResult:
    peer: str
    acknowledged: int = 0
    duplicated: int = 0
    missing: int = 0
    stopped_by_itself: bool | None = None
    pause_after_stop_s: float | None = None
    pause_after_add_s: float | None = None
    note: str = ""


def longest_pause(got: list[deliveries.Delivery], start: float, end: float) -> float:
    """The longest wait for a key's next first delivery in [start, end), minus the producer's 1 s.

    A key with no delivery between its last one and ``end`` counts as waiting until ``end``
    (a stalled key is the longest pause of all).
    """
    last: dict[str, float] = {}
    seen: set[str] = set()
    worst = 0.0
    for d in got:
        if d.head in seen:
            continue
        seen.add(d.head)
        k = key_of(d)
        if start <= d.at < end and k in last:
            worst = max(worst, d.at - max(last[k], start) - 1.0)
        last[k] = d.at
    for at in last.values():
        if at < end:
            worst = max(worst, end - max(at, start) - 1.0)
    return max(0.0, worst)


def run_one(peer: Peer, emulators, kinesis, give_up_s: float, keep: Path | None) -> ScaleResult:  # noqa: ANN001
    from kinesis_src.testing.verify import verify_delivery

    fresh = fresh_stream(kinesis, "scale", 4, keep)
    producer, sink = fresh.producer, fresh.sink
    endpoints = {"stream": fresh.stream, "app": fresh.app, "kinesis": emulators.kinesis_endpoint,
                 "dynamodb": emulators.dynamodb_endpoint, "sink": sink}
    workers = {w: start_worker(peer, w, **endpoints) for w in ("w1", "w2")}
    try:
        if not wait_first(sink, workers, give_up_s):
            return ScaleResult(peer.name, note=f"no record delivered within {give_up_s:.0f} s (logs: {sink})")
        first = time.time()
        stop = threading.Event()

        def produce() -> None:
            while time.time() < first + PRODUCE_S and not stop.is_set():
                t = time.time()
                producer.put_round()
                stop.wait(max(0.0, t + 1.0 - time.time()))

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        sleep_until(first + STOP_AT_S)
        stopped_at = time.time()
        clean = workers["w1"].terminate(GRACE_S)
        sleep_until(first + ADD_AT_S)
        added_at = time.time()
        workers["w3"] = start_worker(peer, "w3", **endpoints)
        thread.join()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and deliveries.count(sink) < producer.acknowledged:
            time.sleep(1.0)
    finally:
        for worker in workers.values():
            worker.kill()
    got = deliveries.read(sink)
    report = verify_delivery([{"data": d.head, "shardId": d.shard} for d in got], producer,
                             mode="at_least_once", raise_on_failure=False)
    return ScaleResult(
        peer.name, acknowledged=producer.acknowledged,
        duplicated=sum(n - 1 for n in report.duplicates.values()), missing=len(report.missing),
        stopped_by_itself=clean,
        pause_after_stop_s=longest_pause(got, stopped_at, added_at),
        pause_after_add_s=longest_pause(got, added_at, first + PRODUCE_S),
    )


def run_all(peers: list[Peer], emulators, opts, log) -> dict:  # noqa: ANN001
    return {"produce_s": PRODUCE_S, "stop_at_s": STOP_AT_S, "add_at_s": ADD_AT_S, "grace_s": GRACE_S,
            "results": each_peer("scale", run_one, peers, emulators, opts, log)}
