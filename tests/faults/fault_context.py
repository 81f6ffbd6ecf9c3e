"""The fault campaign's shared context: paths, timing, one scenario's stream, producer and proxies.

The base of the campaign modules (scenarios.py is the registry): it puts
tests/faults, tests/ and the repository on ``sys.path`` so that the others
can import each other, :mod:`proxy` and ``worker_process`` by name.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Self

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import waiting  # tests/waiting.py
from proxy import ProxyPair

from kinesis_src import AwsSettings
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.retry import RetryPolicy
from kinesis_src.testing import KeyedProducer

KEYS = 20
ROUND_S = 0.2
FAILOVER, RENEW, SCAN = 3.0, 1.0, 0.25
DIRECT_RETRY = RetryPolicy(max_attempts=8, initial_backoff_s=0.05, max_backoff_s=1.0)


def log(message: str) -> None:
    print(f"[campaign {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def poll(condition: Callable[[], Any], timeout_s: float, poll_s: float = 0.1) -> Any:
    """The condition's first truthy value, or None after the deadline (the caller reports what was missing:
    a scenario's missed deadline is a note in its Result, not an error)."""
    try:
        return waiting.wait_for(condition, timeout_s, "a campaign condition", poll_s)
    except AssertionError:
        return None


class PacedProducer:
    """Rounds of one record per key every ``ROUND_S`` seconds, on a thread, straight to the emulator."""

    def __init__(self, producer: KeyedProducer) -> None:
        self.producer = producer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None
        self.last_put_t = time.monotonic()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self.producer.put_round()
                self.last_put_t = time.monotonic()
            except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
                self.error = exc
                return
            next_t += ROUND_S
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise RuntimeError(f"producer failed: {self.error!r}") from self.error


class Context:
    """One scenario's stream, producer, proxies, engine and work directory."""

    def __init__(self, name: str, emulator_env: dict[str, str], workdir: Path, seed: int = 1) -> None:
        self.name = name
        self.env = dict(emulator_env)
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.stream = f"faults-{name}-{int(time.time() * 1000) % 10**8}"
        settings = AwsSettings(region="us-east-1", endpoint_url=emulator_env["KINESIS_SRC_ENDPOINT_URL"],
                               dynamodb_endpoint_url=emulator_env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"],
                               retry=DIRECT_RETRY)
        self.kinesis = KinesisClient(settings)
        self.dynamodb = DynamoDBClient(settings)
        self.proxies = ProxyPair(emulator_env, seed=seed)
        self.producer = KeyedProducer(self.kinesis, self.stream, keys=KEYS)
        self.paced: PacedProducer | None = None
        self.wall_offset = time.time() - time.monotonic()

    def __enter__(self) -> Self:
        self.proxies.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxies.stop()

    def proxied_env(self) -> dict[str, str]:
        return self.proxies.env()

    def create_stream(self, rounds: int = 5) -> None:
        self.kinesis.create_stream(self.stream, 2)
        self.kinesis.wait_active(self.stream)
        self.producer.put_rounds(rounds)

    def split(self) -> None:
        self.kinesis.split_shard(self.stream, "shardId-000000000000", 2**126)
        self.kinesis.wait_active(self.stream)

    def merge(self) -> None:
        self.kinesis.merge_shards(self.stream, "shardId-000000000003", "shardId-000000000001")
        self.kinesis.wait_active(self.stream)

    def put_rounds(self, rounds: int) -> None:
        assert self.paced is None, "the paced producer is running: KeyedProducer is not thread-safe"
        self.producer.put_rounds(rounds)

    def start_producing(self) -> None:
        self.paced = PacedProducer(self.producer).start()

    def stop_producing(self) -> float:
        if self.paced is not None:
            self.paced.stop()
            self.paced = None
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        """Scenario time is wall time: a fault lasts T seconds. Not a wait for a condition."""
        remaining = t - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
