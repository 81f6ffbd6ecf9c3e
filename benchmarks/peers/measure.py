"""Run one worker of one peer until it has delivered what was expected, and measure it.

:func:`run_single` is the start-up and speed workload: a stream that is
already full, one worker process, and the figures a user compares: seconds
from process start to the first record, records per second between the
first and the last delivery, CPU seconds of the worker's process tree per
record over the same span, peak resident memory, and whether every record
arrived exactly once. It stops at ``expect`` distinct records, when the
worker exits, or at ``give_up_s`` (then the result says so).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import deliveries
from peers import Peer, start_worker
from procstat import Sampler

POLL_S = 0.2


@dataclass(frozen=True)
class SingleResult:
    """What one worker did on a stream preloaded with ``expected`` records."""

    peer: str
    expected: int
    delivered: int
    distinct: int
    first_record_s: float | None
    seconds: float | None  # first to last delivery
    records_per_s: float | None
    cpu_us_per_record: float | None
    max_rss_mb: float
    finished: bool
    note: str

    def as_dict(self) -> dict:
        return asdict(self)


def identity(d: deliveries.Delivery) -> str:
    """A record's identity: shard and sequence, or the data head where a peer gives neither."""
    return d.head if d.sequence == "?" else f"{d.shard}/{d.sequence}"


def wait_delivered(sink: Path, worker, sampler: Sampler, expect: int, give_up_s: float) -> tuple[float | None, str]:  # noqa: ANN001
    """Poll the sink until ``expect`` lines; returns (CPU seconds at the first line, why it stopped)."""
    deadline = time.monotonic() + give_up_s
    cpu_first = None
    while True:
        n = deliveries.count(sink)
        if n and cpu_first is None:
            cpu_first = sampler.sample().cpu_s
        if n >= expect and len({identity(d) for d in deliveries.read(sink)}) >= expect:
            return cpu_first, ""
        if worker.process.poll() is not None:
            return cpu_first, f"worker exited with {worker.process.returncode} after {n} records"
        if time.monotonic() > deadline:
            return cpu_first, f"gave up after {give_up_s:.0f} s with {n} of {expect} records"
        time.sleep(POLL_S)


def run_single(peer: Peer, *, stream: str, kinesis: str, dynamodb: str, expect: int, give_up_s: float,
               app: str, keep: Path | None = None, env: dict[str, str] | None = None) -> SingleResult:
    sink = Path(tempfile.mkdtemp(prefix="peers-", dir=keep))
    worker = start_worker(peer, "w1", stream=stream, app=app, kinesis=kinesis, dynamodb=dynamodb, sink=sink, env=env)
    sampler = Sampler(worker.process.pid)
    try:
        cpu_first, note = wait_delivered(sink, worker, sampler, expect, give_up_s)
        end = sampler.stop()
    finally:
        worker.terminate(20)
    got = deliveries.read(sink)
    distinct = len({identity(d) for d in got})
    span = got[-1].at - got[0].at if len(got) > 1 else None
    per_s = len(got) / span if span else None
    cpu = (end.cpu_s - cpu_first) / len(got) * 1e6 if cpu_first is not None and got else None
    if not note and distinct < expect:
        note = f"{expect - distinct} records missing"
    if note:
        note += f" (log: {worker.log})"
    return SingleResult(
        peer=peer.name, expected=expect, delivered=len(got), distinct=distinct,
        first_record_s=(got[0].at - worker.started) if got else None,
        seconds=span, records_per_s=per_s, cpu_us_per_record=cpu,
        max_rss_mb=sampler.peak_rss / 2**20, finished=distinct >= expect, note=note,
    )
