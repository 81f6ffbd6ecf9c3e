"""The fault campaign's scenarios: a workload through a split and a merge, a fault, and the bill.

Every scenario runs against one engine -- the Spark streaming query
(``spark_job.py``, a process writing Parquet with a checkpoint) or three
consumer workers (``fault_worker.py``, one process each) -- with every AWS
call of the engine going through the fault proxies (:mod:`proxy`), while
the test's own producer and the reshards go to the emulators directly.

The standard shape (:func:`during_run`):

1. a fresh 2-shard stream with 100 records (20 keys x 5 rounds);
2. the engine starts and delivers its first records;
3. a paced producer writes 20 records every 0.2 s;
4. the fault starts; 1.5 s later shard 0 is split, 2 s after that its upper
   child is merged with shard 1, so every key has records in a parent and a
   child and every reshard happens while the fault is on;
5. the fault ends; the producer stops 2 s later;
6. the scenario waits (with a deadline) until every produced record was
   delivered, then stops the engine and counts.

What is counted (:class:`Result`):

* ``produced``: records Kinesis acknowledged to the producer;
* ``delivered``: distinct produced records the engine delivered (Spark: in
  committed Parquet output, per the sink's own log);
* ``lost``: produced but never delivered by the deadline (must be 0);
* ``duplicated``: Spark: extra copies of a ``(shardId, sequenceNumber)`` in
  the committed output (must be 0). Consumer: extra deliveries; the ones
  allowed are the unacknowledged tail (a delivery whose checkpoint never
  succeeded); ``dup_acked`` counts deliveries of a record after a delivery
  of it was acknowledged (must be 0);
* ``out_of_order``: per-key counter regressions, each record counted at
  its first delivery (with ``preserveShardOrder`` on, must be 0);
* ``recover_s``: from the end of the fault to the first delivery after it
  (process faults: from the kill or stop to the first delivery of an
  affected shard by a live process; restarts: from the restart);
* ``catchup_s``: from the last record produced to every record delivered.

The campaign's modules, one concept each: fault_context.py (paths, timing,
the stream and producer), fault_results.py (what is counted),
fault_consumer.py and fault_spark.py (the engines and their bills),
fault_shapes.py (the standard shape and process faults), fault_restarts.py
(stop-and-restart scenarios); this module is the list and the runner, and
the one the campaign and the tests import.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fault_consumer import ConsumerEngine, WorkerProc
from fault_context import Context, PacedProducer, log, poll
from fault_restarts import (
    restart_after_reshards,
    spark_option_changes,
    spark_trigger_switch,
)
from fault_results import Result
from fault_shapes import (
    Window,
    burst,
    consumer_sigkill,
    consumer_sigstop,
    during_run,
    next_calls,
    settle,
    spark_sigkill,
    spark_sigstop,
    start_engine,
    wait_delivered,
)
from fault_spark import SparkEngine
from proxy import (
    DYNAMODB,
    KINESIS,
    LATENCY,
    LOST_RESPONSE,
    RESET,
    TRUNCATE,
    Fault,
    aws_error,
    transaction_canceled,
)

from kinesis_src.testing import encode

ENGINES = {"consumer": ConsumerEngine, "spark": SparkEngine}


@dataclass(frozen=True)
class Scenario:
    name: str
    engines: tuple[str, ...]
    fault: str
    body: Callable[[Context, Any, Result], None]
    fast: tuple[str, ...] = ()  # engines for which this scenario is in `make test`
    known_defect: str = ""      # named when the fast subset marks it xfail


K = KINESIS
D = DYNAMODB
READS = (K + "GetRecords",)
CONTROL = (K + "ListShards", K + "GetShardIterator", K + "DescribeStreamSummary", K + "DescribeStream")
ALL_K = (K,)
ALL_D = (D,)
BOTH = ("consumer", "spark")

SCENARIOS: list[Scenario] = [
    Scenario("kinesis-throttling", BOTH,
             "6 s burst: GetRecords PTE 50%, other Kinesis calls LimitExceeded 50%",
             during_run(burst(lambda: aws_error("pte", READS, "ProvisionedThroughputExceededException", probability=0.5),
                              lambda: aws_error("limit", CONTROL, "LimitExceededException", probability=0.5),
                              seconds=6)),
             fast=("consumer",)),
    Scenario("kinesis-5xx", BOTH, "6 s burst: every Kinesis call 500 InternalFailure 25% / 503 ServiceUnavailable 25%",
             during_run(burst(lambda: aws_error("500", ALL_K, "InternalFailure", status=500, probability=0.25),
                              lambda: aws_error("503", ALL_K, "ServiceUnavailable", status=503, probability=1 / 3),
                              seconds=6))),
    Scenario("kinesis-reset", BOTH, "6 s burst: 30% of Kinesis answers reset (RST) mid-body",
             during_run(burst(lambda: Fault("reset", RESET, ALL_K, probability=0.3), seconds=6)),
             fast=("consumer",)),
    Scenario("kinesis-truncated", BOTH, "6 s burst: 30% of Kinesis answers truncated (Content-Length kept, FIN)",
             during_run(burst(lambda: Fault("truncate", TRUNCATE, ALL_K, probability=0.3), seconds=6))),
    Scenario("kinesis-latency", BOTH, "8 s burst: 50% of Kinesis calls delayed 2 s",
             during_run(burst(lambda: Fault("latency", LATENCY, ALL_K, probability=0.5, delay_s=2.0), seconds=8))),
    Scenario("kinesis-expired-iterator", BOTH, "6 s burst: GetRecords ExpiredIteratorException 50%",
             during_run(burst(lambda: aws_error("expired", READS, "ExpiredIteratorException", probability=0.5),
                              seconds=6))),
    Scenario("dynamodb-throttling", BOTH,
             "6 s burst: every DynamoDB call ThrottlingException 25% / ProvisionedThroughputExceeded 33%",
             during_run(burst(lambda: aws_error("throttling", ALL_D, "ThrottlingException", probability=0.25),
                              lambda: aws_error("ddb-pte", ALL_D, "ProvisionedThroughputExceededException",
                                                probability=1 / 3),
                              seconds=6)),
             fast=("consumer",)),
    Scenario("dynamodb-transactions", BOTH,  # consumer: SHARD_END and child leases are one transaction
             "8 s burst: TransactWriteItems cancelled (TransactionConflict) 40% / TransactionInProgressException 30%",
             during_run(burst(lambda: transaction_canceled("conflict", "TransactionConflict", probability=0.4),
                              lambda: aws_error("in-progress", (D + "TransactWriteItems",),
                                                "TransactionInProgressException", probability=0.5),
                              seconds=8))),
    Scenario("dynamodb-lost-response", BOTH,
             "the answers to the next 3 UpdateItem, 2 PutItem, 2 TransactWriteItems, 1 DeleteItem are lost "
             "after the write landed (RST)",
             during_run(next_calls(lambda: Fault("lost-update", LOST_RESPONSE, (D + "UpdateItem",), count=3),
                                   lambda: Fault("lost-put", LOST_RESPONSE, (D + "PutItem",), count=2),
                                   lambda: Fault("lost-txn", LOST_RESPONSE, (D + "TransactWriteItems",), count=2),
                                   lambda: Fault("lost-delete", LOST_RESPONSE, (D + "DeleteItem",), count=1),
                                   seconds=6))),
    Scenario("sigkill-worker", ("consumer",), "SIGKILL one of 3 workers while split+merge happen",
             during_run(consumer_sigkill), fast=("consumer",)),
    Scenario("sigstop-worker", ("consumer",), "SIGSTOP one of 3 workers for failover+2 s (5 s), then SIGCONT",
             during_run(consumer_sigstop), fast=("consumer",)),
    Scenario("sigkill-driver", ("spark",), "SIGKILL the driver (process group) and restart it at once",
             during_run(spark_sigkill)),
    Scenario("sigstop-driver", ("spark",), "SIGSTOP the driver (process group) 12 s (> 10 s claim failover), SIGCONT",
             during_run(spark_sigstop)),
    Scenario("restart-after-reshards", BOTH, "stopped (consumer: SIGTERM, Spark: SIGKILL); split and merge "
             "while down; restart", restart_after_reshards),
    Scenario("trigger-switch", ("spark",), "AvailableNow -> processing-time -> AvailableNow, a reshard between",
             spark_trigger_switch),
    Scenario("option-changes", ("spark",), "restarts changing maxRecordsPerTrigger 60 -> unset -> 500, "
             "shardsPerTask 1 -> 2, preserveShardOrder true -> false; killed mid-run, a reshard between",
             spark_option_changes),
]


def run(scenario: Scenario, engine_name: str, emulator_env: dict[str, str], workdir: Path) -> Result:
    """Run one scenario on one engine; never raises (an error becomes a failure in the Result)."""
    result = Result(scenario.name, engine_name, scenario.fault)
    began = time.monotonic()
    log(f"{scenario.name} / {engine_name}: start")
    with Context(f"{scenario.name}-{engine_name}", emulator_env, workdir / f"{scenario.name}-{engine_name}") as ctx:
        engine = ENGINES[engine_name](ctx)
        try:
            scenario.body(ctx, engine, result)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            result.failures.append(f"scenario error: {type(exc).__name__}: {exc}")
            result.notes.append(traceback.format_exc()[-1500:])
            try:
                engine.account(result, ctx.producer.expected(), time.monotonic(), None, time.monotonic())
            except Exception:  # noqa: BLE001, S110 - the scenario error is the failure reported
                pass
        finally:
            try:
                ctx.stop_producing()
            except Exception as exc:  # noqa: BLE001
                result.failures.append(str(exc))
            engine.close()
            result.injected = ctx.proxies.injections()
    result.elapsed_s = round(time.monotonic() - began, 1)
    log(f"{scenario.name} / {engine_name}: {result.verdict} produced={result.produced} delivered={result.delivered} "
        f"lost={result.lost} dup={result.duplicated} dup_acked={result.dup_acked} ooo={result.out_of_order} "
        f"recover={result.recover_s} catchup={result.catchup_s} injected={result.injected} "
        f"failures={result.failures} notes={result.notes[:2]} ({result.elapsed_s}s)")
    return result


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    raise KeyError(name)


__all__ = [
    "ENGINES", "SCENARIOS", "ConsumerEngine", "Context", "PacedProducer", "Result", "Scenario", "SparkEngine",
    "Window", "WorkerProc", "by_name", "during_run", "encode", "log", "poll", "run", "settle", "start_engine",
    "wait_delivered",
]
