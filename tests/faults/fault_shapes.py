"""How a fault meets the workload: the standard shape (:func:`during_run`), fault windows, process faults.

See scenarios.py's docstring for the shape step by step.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from fault_consumer import ConsumerEngine
from fault_context import FAILOVER, Context, log, poll
from fault_results import Result
from fault_spark import SparkEngine
from proxy import Fault

SPLIT_AFTER_S, MERGE_AFTER_S = 1.5, 3.5


@dataclass
class Window:
    """What a fault callback did: when the fault ended, which shards it hit (None: all), who it hit."""

    end: float
    affected: set[str] | None = None
    victim: str | None = None
    measured_from: float | None = None  # recovery measured from here instead of ``end``


def wait_delivered(ctx: Context, engine: Any, timeout_s: float, restart_dead_spark: bool = True) -> bool:
    """Poll until every produced record was delivered. A Spark query that died is restarted once per death
    (as an operator would), after its death was recorded; the restart runs without changing the faults."""
    expected = ctx.producer.expected()

    def done() -> bool:
        if isinstance(engine, SparkEngine) and engine.died() and restart_dead_spark:
            log(f"{ctx.name}: query died ({engine.deaths[-1][:200]}); restarting it")
            ctx.proxies.clear()
            engine.start(*engine.args)
        return expected <= engine.delivered_keys()

    return bool(poll(done, timeout_s, poll_s=0.5 if isinstance(engine, SparkEngine) else 0.2))


def start_engine(ctx: Context, engine: Any, *spark_args: str) -> None:
    if isinstance(engine, SparkEngine):
        engine.start(*spark_args)
    else:
        engine.start()
    timeout = 180 if isinstance(engine, SparkEngine) else 60
    if not wait_delivered(ctx, engine, timeout):
        raise RuntimeError(f"{engine.name} delivered nothing within {timeout}s of its start"
                           + (f": {engine.error_line()}" if isinstance(engine, SparkEngine) else
                              f": {engine.failures()}"))


def during_run(inject: Callable[[Context, Any], Window]) -> Callable[[Context, Any, Result], None]:
    """The standard shape: ``inject(ctx, engine)`` starts the fault, reshards are timed from that moment."""

    def body(ctx: Context, engine: Any, result: Result) -> None:
        ctx.create_stream()
        start_engine(ctx, engine)
        ctx.start_producing()
        began = time.monotonic()
        reshards = threading.Thread(target=_reshard_on_schedule, args=(ctx, began), daemon=True)
        reshards.start()
        window = inject(ctx, engine)
        reshards.join(60)
        ctx.sleep_until(max(window.end, began + MERGE_AFTER_S) + 2.0)
        last_put = ctx.stop_producing()
        ctx.proxies.clear()
        timeout = 240 if isinstance(engine, SparkEngine) else 90
        caught_up = wait_delivered(ctx, engine, timeout)
        if not caught_up:
            result.notes.append(f"not caught up {timeout}s after the producer stopped")
        settle(engine)
        engine.account(result, ctx.producer.expected(), window.measured_from or window.end, window.affected,
                       last_put, exclude_worker=window.victim)

    return body


def _reshard_on_schedule(ctx: Context, began: float) -> None:
    ctx.sleep_until(began + SPLIT_AFTER_S)
    ctx.split()
    ctx.sleep_until(began + MERGE_AFTER_S)
    ctx.merge()


def settle(engine: Any) -> None:
    """Stop the engine so its last events are in: consumer workers get SIGTERM (their checkpoints land)."""
    if isinstance(engine, ConsumerEngine):
        engine.stop_all()
    else:
        engine.kill()


def burst(*faults: Callable[[], Fault], seconds: float) -> Callable[[Context, Any], Window]:
    def inject(ctx: Context, engine: Any) -> Window:
        began = time.monotonic()
        for make in faults:
            fault = make()
            fault.duration_s = seconds
            ctx.proxies.add(fault)
        ctx.sleep_until(began + seconds)
        return Window(end=began + seconds)

    return inject


def next_calls(*faults: Callable[[], Fault], seconds: float) -> Callable[[Context, Any], Window]:
    """Faults bounded by a count; the window ends at the last injection (or after ``seconds``)."""

    def inject(ctx: Context, engine: Any) -> Window:
        began = time.monotonic()
        added = [ctx.proxies.add(make()) for make in faults]
        ctx.sleep_until(began + seconds)
        ends = [f.last_at for f in added if f.last_at is not None]
        return Window(end=max(ends) if ends else began + seconds)

    return inject


# -- process faults ---------------------------------------------------------------------------------------------


def consumer_sigkill(ctx: Context, engine: Any) -> Window:
    victim = next(iter(engine.workers))
    affected = {s for s, owner in engine.owners().items() if owner == victim}
    killed = engine.workers[victim].signal(signal.SIGKILL)
    return Window(end=killed, affected=affected or None, victim=victim)


def consumer_sigstop(ctx: Context, engine: Any) -> Window:
    victim = next(iter(engine.workers))
    affected = {s for s, owner in engine.owners().items() if owner == victim}
    stopped = engine.workers[victim].signal(signal.SIGSTOP)
    ctx.sleep_until(stopped + FAILOVER + 2.0)
    resumed = engine.workers[victim].signal(signal.SIGCONT)
    return Window(end=resumed, affected=affected or None, victim=victim, measured_from=stopped)


def spark_sigkill(ctx: Context, engine: SparkEngine) -> Window:
    engine.kill()
    restarted = engine.start(*engine.args)
    return Window(end=restarted)


def spark_sigstop(ctx: Context, engine: SparkEngine) -> Window:
    stopped = engine.signal(signal.SIGSTOP)
    ctx.sleep_until(stopped + 12.0)  # longer than the 10 s claim failover
    resumed = engine.signal(signal.SIGCONT)
    return Window(end=resumed)
