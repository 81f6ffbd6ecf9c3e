"""Idle-shard probes for the Spark driver: does a shard that reached the tip have new records?

One GetRecords(Limit=1) per due shard on a thread pool, in a budget per trigger (docs/spark.md).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from ..aws import KinesisClient
from ..errors import IteratorExpiredError, ShardNotFoundError
from ..positions import Position
from ..retrieval.polling import MIN_FETCH_INTERVAL_S, ShardReader
from ..stream_ref import StreamRef

T = TypeVar("T")

PROBE_BUDGET_S = 0.4  # a trigger starts no new probe after this long (see IdleProber.probe)
PROBE_WORKERS = 32  # the botocore connection pool holds 32 (aws/boundary.client_config): no waiting for a socket


@dataclass(frozen=True)
class ProbeResult:
    """One probe: new data (or a stop such as SHARD_END) found, the lag it reported, the shard gone."""

    has_data: bool
    millis_behind_latest: int | None = None
    gone: bool = False


@dataclass
class _Probed:
    position: Position
    reader: ShardReader | None  # kept while the shard stays empty: its iterator goes on from the last probe
    at: float


_Outcome = tuple[ProbeResult, "_Probed | None"]  # what a probe found, and what to remember of the shard


class IdleProber:
    """Probes idle shards, at most one call per shard per interval, many shards at once."""

    def __init__(
        self,
        kinesis: KinesisClient,
        stream: str | StreamRef,  # a name, or the ref of a stream called by ARN
        interval_s: float,
        workers: int = PROBE_WORKERS,
        budget_s: float = PROBE_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.kinesis = kinesis
        self.stream = stream
        self.interval_s = max(interval_s, MIN_FETCH_INTERVAL_S)
        self.workers = workers
        self.budget_s = budget_s
        self._clock = clock
        self._sleep = sleep
        self._probed: dict[str, _Probed] = {}
        self._read_at: dict[str, float] = {}  # shard -> when a task's read of it was learned
        self._pool: ThreadPoolExecutor | None = None
        self._round_deadline: float | None = None  # set by new_round; else each budgeted call has its own
        self._round_started = 0  # calls started in this round (the first `workers` start whatever the time)

    def new_round(self) -> None:
        """A trigger starts: its checks and probes share one budget from now (listing included)."""
        self._round_deadline = self._clock() + self.budget_s
        self._round_started = 0

    def read_by_task(self, shard_ids: Iterable[str]) -> None:
        """A batch's recorded ends were just learned: those shards' readers called them moments ago."""
        now = self._clock()
        self._read_at = {s: t for s, t in self._read_at.items() if now - t < MIN_FETCH_INTERVAL_S}
        self._read_at.update((sid, now) for sid in shard_ids)

    def due(self, shard_ids: Sequence[str], positions: Mapping[str, Position]) -> list[str]:
        """Shards not probed at their current position within the interval, least recently probed first."""
        now = self._clock()
        out = []
        for sid in shard_ids:
            last = self._probed.get(sid)
            if last is None or last.position != positions[sid]:
                out.append((-math.inf, sid))
            elif now - last.at >= self.interval_s:
                out.append((last.at, sid))
        return [sid for _, sid in sorted(out, key=lambda pair: pair[0])]  # stable: ties keep the given order

    def _rest(self, shard_ids: Sequence[str]) -> None:
        """Wait (once) until every shard's last task call is ``MIN_FETCH_INTERVAL_S`` old.

        Waiting, not skipping: a skipped shard would wait for the next trigger, far later.
        """
        last_read = max((self._read_at.get(sid, -math.inf) for sid in shard_ids), default=-math.inf)
        wait = last_read + MIN_FETCH_INTERVAL_S - self._clock()
        if wait > 0:
            self._sleep(wait)

    def probe(self, shard_ids: Sequence[str], positions: Mapping[str, Position]) -> dict[str, ProbeResult]:
        """Probe due shards concurrently, starting new probes until the round's time budget is spent.

        Shards left over are the least recently probed next time: long rounds spread over triggers.
        """
        due = self.due(shard_ids, positions)
        self._rest(due)
        last = {sid: self._probed.get(sid) for sid in due}
        outcomes = self.map(lambda sid: self._probe_one(sid, positions[sid], last[sid]), due, budgeted=True)
        return self._apply(due, outcomes, positions)

    def map(self, fn: Callable[[str], T], shard_ids: Sequence[str], budgeted: bool = False) -> list[T | None]:
        """``fn`` per shard on the probe threads, results in order.

        ``budgeted``: past the round's budget (:meth:`new_round`; else ``budget_s`` from now) no
        call starts and its result is None, except the round's first ``workers``.
        """
        in_round = self._round_deadline is not None
        if not budgeted:
            deadline, free = math.inf, len(shard_ids)
        elif in_round:
            deadline, free = self._round_deadline, max(self.workers - self._round_started, 0)
        else:
            deadline, free = self._clock() + self.budget_s, self.workers

        def run(job: tuple[int, str]) -> T | None:
            index, sid = job
            if index >= free and self._clock() >= deadline:
                return None  # over budget: not started
            return fn(sid)

        jobs = list(enumerate(shard_ids))
        results = [run(job) for job in jobs] if len(jobs) <= 1 else list(self._executor().map(run, jobs))
        if in_round:
            self._round_started += sum(r is not None for r in results)
        return results

    def _apply(
        self, due: Sequence[str], outcomes: Sequence[_Outcome | None], positions: Mapping[str, Position]
    ) -> dict[str, ProbeResult]:
        for sid in [s for s in self._probed if s not in positions]:  # left the frontier (drained, trimmed)
            del self._probed[sid]
        results: dict[str, ProbeResult] = {}
        for sid, outcome in zip(due, outcomes):
            if outcome is None:
                continue
            result, kept = outcome
            if kept is None:
                self._probed.pop(sid, None)
            else:
                self._probed[sid] = kept
            results[sid] = result
        return results

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="kinesis-probe")
        return self._pool

    def _probe_one(self, sid: str, position: Position, last: _Probed | None) -> _Outcome:
        """One GetRecords(Limit=1); an empty answer keeps the reader, data drops it (a task reads next).

        Runs on a pool thread: it touches only this shard's reader and returns what to remember.
        """
        reader = last.reader if last is not None and last.position == position else None
        started = self._clock()
        try:
            if reader is None:
                reader = ShardReader(self.kinesis, self.stream, sid, position, fetch_interval_s=0)
            step = reader.step(1)
        except IteratorExpiredError:
            return ProbeResult(False), _Probed(position, None, started)  # a new iterator next interval
        except ShardNotFoundError:
            return ProbeResult(True, gone=True), None  # trimmed since the last listing: a task applies failOnDataLoss
        has_data = step.raw_records > 0 or step.stop is not None
        return ProbeResult(has_data, step.page.millis_behind_latest), _Probed(
            position, None if has_data else reader, started
        )

    def close(self) -> None:
        self._probed.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
