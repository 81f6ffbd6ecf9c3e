"""Correctness under torture: 3 workers, random splits and merges while producing, a SIGKILL, a late joiner.

For each peer, on a fresh kinesis-mock stream (4 shards) and a fresh
application: a few rounds of keyed-counter records go in, workers w1-w3
start, and once the first record is delivered the clock starts:

* the producer (kinesis_src.testing.producer.KeyedProducer, 50 keys, one record
  per key per call) puts ``ROUNDS`` rounds, one every ``ROUND_S``;
* the resharder makes ``RESHARDS`` random splits and merges (same seed for
  every peer), each after the previous one is ACTIVE, ``RESHARD_GAP_S`` apart;
* at ``KILL_AT_S`` the worker that delivered most in the last 5 s is SIGKILLed
  (its whole process group: for KCL, the daemon and its shard processes);
* at ``JOIN_AT_S`` a fourth worker starts.

The run ends when every acknowledged record has been delivered, or
``give_up_s`` after production ended. Reported (kinesis_src.testing.verify):
missing, duplicated, per-key order inversions (a record delivered, the first
time, after a higher counter of its key; keys move from parents to children,
so this is a child read before its parent was drained); the seconds from
the kill until every key last delivered by the killed worker is delivered
again by a survivor; and whether the run finished.

``mode="after-first-sync"`` is the same run except that no reshard happens
before the first record is delivered (the peer's first shard listing is
done): the run where kinesis-mock's AT_TRIM_HORIZON listing (it returns
every shard, children included) cannot reach KCL's first shard sync.
``mode="gentle"`` also starts only w1 at first; w2 and w3 start with the
clock (KCL 3 with three workers starting together on DynamoDB Local never
saw its lease-table GSI turn ACTIVE; see docs/peers.md).
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import deliveries
from ddb_proxy import CountingProxy
from peers import Peer, Worker, start_worker

ROUNDS = 100
ROUND_S = 0.5
RESHARDS = 6
RESHARD_GAP_S = 6.0
KILL_AT_S = 20.0
JOIN_AT_S = 30.0
COST_WINDOW_S = 10.0  # DynamoDB cost in the 10 s before the kill and the 10 s after it (the failover time; w4 joins at its end)
SEED = 22
START_GIVE_UP_S = 240.0


@dataclass
class TortureResult:
    """What happened to one peer under torture."""

    peer: str
    mode: str
    acknowledged: int = 0
    delivered: int = 0
    missing: int = 0
    duplicated: int = 0
    order_inversions: int = 0
    recovery_s: float | None = None
    open_shards_at_kill: int = 0
    ddb_before_kill: dict = field(default_factory=dict)  # requests and capacity per shard-minute, the window before
    ddb_after_kill: dict = field(default_factory=dict)  # the same, the window after the kill
    finished: bool = False
    seconds: float | None = None
    reshards: list[str] = field(default_factory=list)
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def open_shards(kinesis, stream: str) -> list[dict]:  # noqa: ANN001
    shards = kinesis.botocore_client.list_shards(StreamName=stream, ShardFilter={"Type": "AT_LATEST"})["Shards"]
    return sorted(shards, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def reshard_once(kinesis, stream: str, rng: random.Random) -> str:  # noqa: ANN001
    """A random split (of a random open shard, at its middle) or merge (of two adjacent open shards)."""
    shards = open_shards(kinesis, stream)
    if len(shards) > 2 and rng.random() < 0.5:
        i = rng.randrange(len(shards) - 1)
        a, b = shards[i]["ShardId"], shards[i + 1]["ShardId"]
        kinesis.merge_shards(stream, a, b)
        what = f"merge {a}+{b}"
    else:
        shard = rng.choice(shards)
        lo, hi = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(stream, shard["ShardId"], (lo + hi + 1) // 2)
        what = f"split {shard['ShardId']}"
    kinesis.wait_active(stream)
    return what


def busiest_worker(sink: Path, workers: dict[str, Worker], window_s: float = 5.0) -> str:
    """The live worker that delivered most in the last ``window_s`` (the one whose death hurts).

    Ties (e.g. nobody delivered in the window) go to the live worker that delivered most in all.
    """
    now = time.time()
    live = [w for w, worker in workers.items() if worker.process.poll() is None]
    recent = {w: 0 for w in live}
    total = {w: 0 for w in live}
    for d in deliveries.read(sink):
        if d.worker in total:
            total[d.worker] += 1
            recent[d.worker] += d.at > now - window_s
    return max(live, key=lambda w: (recent[w], total[w]))


def recovery_seconds(got: list[deliveries.Delivery], killed: str, kill_at: float) -> float | None:
    """Seconds from the kill until every key the killed worker delivered last is delivered by another."""
    last_by: dict[str, str] = {}
    for d in got:
        if d.at <= kill_at:
            last_by[key_of(d)] = d.worker
    orphans = {k for k, w in last_by.items() if w == killed}
    resumed: dict[str, float] = {}
    for d in got:
        k = key_of(d)
        if d.at > kill_at and k in orphans and d.worker != killed and k not in resumed:
            resumed[k] = d.at - kill_at
    if not orphans or len(resumed) < len(orphans):
        return None
    return max(resumed.values())


def key_of(d: deliveries.Delivery) -> str:
    return d.head.rpartition(":")[0]


def log_cause(sink: Path) -> str:
    """The error line repeated most in the workers' logs (timestamps cut), or "none"."""
    import re
    from collections import Counter

    lines: Counter[str] = Counter()
    for path in sink.rglob("*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if re.search(r"Exception:|ERROR|Error:", line) and not line.lstrip().startswith("at "):
                lines[re.sub(r"^[\d:.\-TZ \[\]m]+", "", line)[:240]] += 1
    return lines.most_common(1)[0][0] if lines else "none"


def wait_first(sink: Path, workers: dict[str, Worker], give_up_s: float) -> bool:
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        if deliveries.count(sink):
            return True
        if all(w.process.poll() is not None for w in workers.values()):
            return False
        time.sleep(0.5)
    return False


def lease_table_has_items(dynamodb_endpoint: str, app: str) -> bool:
    """True once any table named after ``app`` holds an item (the peer's first shard sync is done)."""
    import boto3

    ddb = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test")
    for table in ddb.list_tables()["TableNames"]:
        if table.startswith(app) and ddb.scan(TableName=table, Limit=1)["Items"]:
            return True
    return False


class Producer(threading.Thread):
    """Puts one round every ``slow_s`` until ``started`` is set, then ``ROUNDS`` rounds every ``ROUND_S``."""

    def __init__(self, producer, started: threading.Event, stop: threading.Event) -> None:  # noqa: ANN001
        super().__init__(daemon=True)
        self.producer, self.started, self.stop = producer, started, stop
        self.error: BaseException | None = None

    def run(self) -> None:
        rounds = 0
        try:
            while rounds < ROUNDS and not self.stop.is_set():
                self.producer.put_round()
                if self.started.is_set():
                    rounds += 1
                self.stop.wait(ROUND_S if self.started.is_set() else 2.0)
        except BaseException as exc:  # noqa: BLE001  (reported in the result)
            self.error = exc


class Resharder(threading.Thread):
    """``early`` reshards at once, the rest after ``started``, ``RESHARD_GAP_S`` apart (seeded)."""

    def __init__(self, kinesis, stream: str, early: int, started: threading.Event,  # noqa: ANN001
                 stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.kinesis, self.stream, self.early = kinesis, stream, early
        self.started, self.stop = started, stop
        self.done: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(SEED)
        try:
            for i in range(RESHARDS):
                if i >= self.early:
                    while not self.started.wait(0.5):
                        if self.stop.is_set():
                            return
                    if self.stop.wait(RESHARD_GAP_S):
                        return
                self.done.append(reshard_once(self.kinesis, self.stream, rng))
        except BaseException as exc:  # noqa: BLE001
            self.error = exc


def run_one(peer: Peer, emulators, kinesis, mode: str, give_up_s: float, keep: Path | None) -> TortureResult:  # noqa: ANN001
    """One torture run of ``peer``; ``mode`` is "plain" (2 reshards before any worker's first record) or
    "after-first-sync" (every reshard after the first record)."""
    from kinesis_src.testing.verify import verify_delivery
    from kinesis_src.testing.producer import KeyedProducer

    result = TortureResult(peer.name, mode)
    stream, app = f"torture-{uuid.uuid4().hex[:6]}", f"torture-{uuid.uuid4().hex[:6]}"
    kinesis.create_stream(stream, 4)
    kinesis.wait_active(stream)
    producer = KeyedProducer(kinesis, stream, keys=50)
    producer.put_rounds(5)
    sink = Path(tempfile.mkdtemp(prefix="torture-", dir=keep))
    proxy = CountingProxy(emulators.dynamodb_endpoint).__enter__()
    endpoints = {"stream": stream, "app": app, "kinesis": emulators.kinesis_endpoint,
                 "dynamodb": proxy.url, "sink": sink}
    started, stop = threading.Event(), threading.Event()
    producing = Producer(producer, started, stop)
    resharding = Resharder(kinesis, stream, 2 if mode == "plain" else 0, started, stop)
    first_ones = (1,) if mode == "gentle" else (1, 2, 3)
    workers = {f"w{i}": start_worker(peer, f"w{i}", **endpoints) for i in first_ones}
    spawned = time.time()
    producing.start()
    resharding.start()
    try:
        if not wait_first(sink, workers, START_GIVE_UP_S):
            result.note = (f"no record delivered within {START_GIVE_UP_S:.0f} s of start; its logs' most frequent "
                           f"error: {log_cause(sink)} (logs: {sink})")
            return finish(result, producer, resharding, sink)
        started.set()
        first = time.time()
        result.note = f"first record {first - spawned:.0f} s after start"
        for i in (2, 3):
            if f"w{i}" not in workers:
                workers[f"w{i}"] = start_worker(peer, f"w{i}", **endpoints)
        sleep_until(first + KILL_AT_S)
        killed = busiest_worker(sink, workers)
        workers[killed].kill()
        kill_at = time.time()
        result.open_shards_at_kill = len(open_shards(kinesis, stream))
        sleep_until(first + JOIN_AT_S)
        workers["w4"] = start_worker(peer, "w4", **endpoints)
        producing.join()
        resharding.join()
        done_by = time.monotonic() + give_up_s
        while time.monotonic() < done_by and not delivered_all(sink, producer.expected()):
            time.sleep(1.0)
        result.seconds = time.time() - first
        result.ddb_before_kill = ddb_window(proxy, kill_at - COST_WINDOW_S, kill_at, result.open_shards_at_kill)
        result.ddb_after_kill = ddb_window(proxy, kill_at, kill_at + COST_WINDOW_S, result.open_shards_at_kill)
        got = deliveries.read(sink)
        result.recovery_s = recovery_seconds(got, killed, kill_at)
        report = verify_delivery([{"data": d.head, "shardId": d.shard} for d in got], producer,
                                 mode="at_least_once", raise_on_failure=False)
        result.missing, result.order_inversions = len(report.missing), len(report.out_of_order)
        result.duplicated = sum(n - 1 for n in report.duplicates.values())
        result.finished = not report.missing
        result.note += f"; killed {killed}" + ("" if result.finished else f"; gave up {give_up_s:.0f} s after production ended")
        return finish(result, producer, resharding, sink)
    finally:
        stop.set()
        for worker in workers.values():
            worker.kill()
        proxy.__exit__(None, None, None)


def ddb_window(proxy: CountingProxy, since: float, until: float, shards: int) -> dict:
    """DynamoDB requests and capacity units per shard-minute in [since, until), all workers together."""
    shard_minutes = max(1, shards) * (until - since) / 60
    return {"requests": sum(proxy.count(since, until).values()) / shard_minutes,
            "capacity": proxy.capacity_units(since, until) / shard_minutes}


def finish(result: TortureResult, producer, resharding: Resharder, sink: Path) -> TortureResult:  # noqa: ANN001
    got = deliveries.read(sink)
    result.acknowledged, result.delivered = producer.acknowledged, len(got)
    if not got:
        result.missing = producer.acknowledged
    result.reshards = list(resharding.done)
    if resharding.error is not None:
        result.note += f"; resharding failed: {resharding.error}"
    return result


def delivered_all(sink: Path, expected: set[tuple[str, int]]) -> bool:
    if deliveries.count(sink) < len(expected):
        return False
    seen = set()
    for d in deliveries.read(sink):
        key, _, n = d.head.rpartition(":")
        if n.isdigit():
            seen.add((key, int(n)))
    return expected <= seen


def sleep_until(moment: float) -> None:
    """Pace the schedule (a benchmark's timeline, not a wait for a condition)."""
    time.sleep(max(0.0, moment - time.time()))


def run_all(peers: list[Peer], emulators, opts, log) -> dict:  # noqa: ANN001
    """Every peer in plain mode; a peer that did not finish, again in each gentler mode until one finishes."""
    from scenario import kinesis_client

    kinesis = kinesis_client(emulators.kinesis_endpoint)
    out: dict = {}
    for peer in peers:
        for mode in opts.torture_modes.split(","):
            if any(r["finished"] for r in out.get(peer.name, {}).values()):
                break
            log(f"torture: {peer.name} ({mode})")
            result = run_one(peer, emulators, kinesis, mode, opts.torture_give_up_s, opts.keep)
            log(f"  {result}")
            out.setdefault(peer.name, {})[mode] = result.as_dict()
    return {"settings": {"rounds": ROUNDS, "round_s": ROUND_S, "reshards": RESHARDS, "reshard_gap_s": RESHARD_GAP_S,
                         "kill_at_s": KILL_AT_S, "join_at_s": JOIN_AT_S, "seed": SEED, "keys": 50,
                         "start_give_up_s": START_GIVE_UP_S, "give_up_s": opts.torture_give_up_s},
            "results": out}
