"""Scenarios that stop and restart the engine (reshards while it is down, trigger and option changes)."""

from __future__ import annotations

import time
from typing import Any

from fault_context import Context, poll
from fault_results import Result
from fault_shapes import settle, start_engine, wait_delivered
from fault_spark import SparkEngine


def restart_after_reshards(ctx: Context, engine: Any, result: Result) -> None:
    """Stop the engine, split and merge while it is down (records in every shard), restart."""
    ctx.create_stream()
    start_engine(ctx, engine)
    ctx.start_producing()
    ctx.sleep_until(time.monotonic() + 1.0)
    if isinstance(engine, SparkEngine):
        engine.kill()
    else:
        engine.stop_all()
    ctx.sleep_until(time.monotonic() + 1.0)
    ctx.stop_producing()  # one producer at a time: KeyedProducer is not thread-safe
    ctx.split()
    ctx.put_rounds(5)
    ctx.merge()
    ctx.put_rounds(5)
    last_put = time.monotonic()
    restarted = time.monotonic()
    if isinstance(engine, SparkEngine):
        engine.start(*engine.args)
    else:
        engine.start()
    caught_up = wait_delivered(ctx, engine, 240 if isinstance(engine, SparkEngine) else 90)
    if not caught_up:
        result.notes.append("not caught up after the restart")
    settle(engine)
    engine.account(result, ctx.producer.expected(), restarted, None, max(last_put, restarted))


def spark_trigger_switch(ctx: Context, engine: SparkEngine, result: Result) -> None:
    """AvailableNow, then processing-time, then AvailableNow again; a reshard between each."""
    ctx.create_stream()
    engine.start("--trigger", "available-now")
    code = engine.wait_exit(240)
    if code is None:
        result.failures.append("AvailableNow run 1 did not finish within 240s")
        engine.kill()
    ctx.put_rounds(5)
    ctx.split()
    ctx.put_rounds(5)
    switched = engine.start("--trigger", "processing")
    ctx.start_producing()
    ctx.sleep_until(time.monotonic() + 2.0)
    last_put = ctx.stop_producing()
    if not wait_delivered(ctx, engine, 120, restart_dead_spark=False):
        result.notes.append("processing-time run after AvailableNow did not catch up within 120s")
    recovered = [t for _, t, rows in engine.batches() if t > switched and rows]
    recover_s = round(min(recovered) - switched, 2) if recovered else None
    engine.kill()
    ctx.merge()
    ctx.put_rounds(5)
    last_put = time.monotonic()
    engine.start("--trigger", "available-now")
    if engine.wait_exit(240) is None:
        result.failures.append("AvailableNow run 3 did not finish within 240s")
        engine.kill()
    engine.account(result, ctx.producer.expected(), switched, None, last_put)
    result.recover_s = recover_s
    result.notes.append("recovery: processing-time run after AvailableNow, from its start")


def spark_option_changes(ctx: Context, engine: SparkEngine, result: Result) -> None:
    """Restarts that change maxRecordsPerTrigger, shardsPerTask and preserveShardOrder, each after a reshard."""
    ctx.create_stream(rounds=10)
    phases = [
        ("--max-records-per-trigger", "60", "--shards-per-task", "1"),
        ("--shards-per-task", "2"),
        ("--max-records-per-trigger", "500", "--no-preserve-order"),
    ]
    reshards = [ctx.split, ctx.merge, None]
    restarted = time.monotonic()
    last_put = restarted
    for args, reshard in zip(phases, reshards):
        committed = len(engine.batches())
        restarted = engine.start(*args)
        poll(lambda n=committed: len(engine.batches()) > n or engine.died(), 180, 0.5)  # this run committed a batch
        ctx.start_producing()  # then records arrive while it runs (kept short: a few hundred per run)
        ctx.sleep_until(time.monotonic() + 3.0)
        last_put = ctx.stop_producing()
        engine.kill()  # mid-run: whatever was in flight is replayed by the next configuration
        if reshard is not None:
            reshard()
            ctx.put_rounds(3)
    engine.start(*phases[-1])
    if not wait_delivered(ctx, engine, 240):
        result.notes.append("not caught up after the last restart")
    engine.kill()
    engine.account(result, ctx.producer.expected(), restarted, None, last_put)
    result.order_required = False  # the last configuration turns preserveShardOrder off
    result.notes.append("order not required: last run has preserveShardOrder=false")
