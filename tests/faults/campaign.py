#!/usr/bin/env python3
"""Run the fault campaign and write the table to docs/reliability.md.

    make campaign
    # which is:
    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python tests/faults/campaign.py

Options: ``--only NAME[,NAME]`` (scenario names), ``--engine consumer|spark``,
``--fast`` (only the `make test` subset), ``--output PATH`` (default
docs/reliability.md; ``-`` prints the table only), ``--json PATH`` (raw
results). Starts its own emulators (kinesis-mock, DynamoDB Local) and stops
them by PID; must run inside the private network namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "localstack"))

import launcher  # noqa: E402
import scenarios  # noqa: E402

COMMAND = "make campaign"
RAW_COMMAND = ".venv/bin/python localstack/launcher.py isolated -- .venv/bin/python tests/faults/campaign.py"


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def table(results: list[scenarios.Result]) -> str:
    lines = [
        "| scenario | engine | fault | injected | produced | delivered | lost | duplicated | "
        "out of order | recover s | catch-up s | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        injected = sum(r.injected.values())
        dup = str(r.duplicated)
        if r.engine == "consumer":
            dup = f"{r.duplicated} ({r.dup_acked} after an ack, {getattr(r, 'acked_twice', 0)} acked twice)"
        ooo = str(r.out_of_order) + ("" if r.order_required else " (not required)")
        lines.append(f"| {r.scenario} | {r.engine} | {r.fault} | {injected} | {r.produced} | {r.delivered} | "
                     f"{r.lost} | {dup} | {ooo} | {fmt(r.recover_s)} | {fmt(r.catchup_s)} | **{r.verdict}** |")
    return "\n".join(lines)


TRUNCATION = (
    "**Truncated bodies.** botocore accepts a 200 answer whose body is shorter than its Content-Length "
    "(the connection closed early) without an error, and its JSON parser turns a body that does not parse "
    "into `{'message': <partial body>}`. So `KinesisClient.get_shard_iterator` and `describe_stream` "
    "(`kinesis_src/aws/kinesis.py`) index a missing key and a `KeyError` escapes the error translation and "
    "the retry policy (a consumer worker dies at start, the Spark query dies in `latestOffset`); "
    "`KinesisClient.list_shards` returns `[]` for a stream that has shards; and the fast GetRecords parser "
    "raises `MalformedResponseError`, which is not retriable (`kinesis_src/aws/decode.py`, "
    "`kinesis_src/errors.py`). Invariant 7 asks for connection errors to be retried: a 2xx body that does not "
    "parse (or is shorter than its Content-Length) should become a retriable connection error at the AWS "
    "boundary. Reproduced one call at a time by the truncation tests in `tests/faults/test_fault_scenarios.py` "
    "(fixed in 61a35e4)."
)
MERGE_CHILD = (
    "**A merge child read before one of its parents** (found by this campaign, fixed in f6680b3; if "
    "consumer order breaks again, check this first). At the SHARD_END of one parent, "
    "`Coordinator.shard_ended` -> `LeaseTable.mark_shard_end` creates the merge child's lease. The other "
    "parent, itself a split child whose own parent is still being read (here: slowed down by the faults), "
    "has no lease yet: it gets one when its parent ends or at the leader's next shard sync "
    "(`sync_interval_s`, 60 s). `assignment.is_assignable` (`kinesis_src/leases/assignment.py`) counts a "
    "parent without a lease as drained (trimmed), so the child is leased and read before that parent, and "
    "per-key order breaks (no record is lost or duplicated). Deterministic reproduction: "
    "`test_a_merge_child_waits_for_a_parent_that_has_no_lease_yet` holds shard 0's reads for 8 s "
    "after the split+merge."
)

IN_PROGRESS = (
    "**TransactionInProgressException is not retried.** DynamoDB answers it when a TransactWriteItems with "
    "the same ClientRequestToken is still being processed, e.g. our own retry after a lost answer; the "
    "documented remedy is to retry with the same token, which `DynamoDBClient.transact_write` "
    "(`kinesis_src/aws/dynamodb.py`) already keeps for idempotency. But the code is neither a "
    "cancellation (handled in `transact_write`) nor in a retriable set of `_translate_client_error` "
    "(`kinesis_src/aws/boundary.py`), so it becomes a plain, non-retriable `KinesisSourceError`: the Spark "
    "task recording its batch's progress fails and the query dies. Reproduced by "
    "`test_transaction_in_progress_is_retried` (fixed in 81dc834)."
)

STALE_HOLDER = (
    "**REDELIVERED: a record delivered again after another worker had acknowledged it.** A lease moved from "
    "a live worker that still handed out the batches it had fetched, records the new holder had already "
    "checkpointed. The old holder's checkpoint raises `LeaseLostError` and writes nothing (fencing holds), "
    "so nothing is lost and no record is acknowledged twice. Steals are two-phase since 420a1b1 (the thief "
    "requests the lease, the holder releases it at its next scan, the thief forces only `failover_s` after "
    "the announced request, when a holder that has not seen it has a stale view and delivers nothing), and a "
    "worker trusts its leases only until its last acknowledged heartbeat's send time plus the failover time. "
    "Look for a holder of an older version (it ignores steal requests) or a lease taken while its holder's "
    "view was still fresh (the lease simulation's safety checker labels how each overlap happened)."
)

EXPIRED_TWICE = (
    "**Expired iterators fail a Spark task.** `ShardReader.fetch` (`kinesis_src/retrieval/polling.py`) answers an "
    "`IteratorExpiredError` by getting a fresh iterator at its position, up to 10 times with backoff "
    "(~14 s, since 39df7ed; once before 82009c7). If this shows, the burst outlasted that budget: the error "
    "escapes `tasks.read_slice`, the task fails and, with Spark's local-mode task retries off, the query "
    "dies (the restart then loses and duplicates nothing). This fault model also expires brand-new "
    "iterators, which real Kinesis does not do."
)


def diagnoses(results: list[scenarios.Result]) -> list[str]:
    texts = []
    blob = " ".join(" ".join(r.failures + r.notes) for r in results)
    if any(sig in blob for sig in ("KeyError: 'ShardIterator'", "KeyError: 'StreamDescriptionSummary'",
                                   "MalformedResponseError", "KeyError: 'Shards'")):
        texts.append(TRUNCATION)
    if "TransactionInProgressException" in " ".join(" ".join(r.failures) for r in results):
        texts.append(IN_PROGRESS)
    if "IteratorExpiredError" in " ".join(" ".join(r.failures) for r in results):
        texts.append(EXPIRED_TWICE)
    if any(r.verdict == "REDELIVERED" for r in results):
        texts.append(STALE_HOLDER)
    if any(r.engine == "consumer" and r.out_of_order and r.order_required for r in results):
        texts.append(MERGE_CHILD)
    return texts


def details(results: list[scenarios.Result]) -> str:
    out = []
    for r in results:
        if r.verdict == "ok" and not r.failures:
            continue
        out.append(f"- **{r.scenario} / {r.engine}: {r.verdict}.**")
        for failure in r.failures:
            out.append(f"  - {failure}")
        for note in r.notes:
            if "Traceback" in note:
                continue
            out.append(f"  - {note}")
    if not out:
        return "Every scenario passed."
    found = diagnoses(results)
    if found:
        out += ["", "Diagnosis of the failures above (matched on their error messages and verdicts):", ""]
        out += [f"- {text}" for text in found]
    return "\n".join(out)


def code_version() -> str:
    """The commit measured: CAMPAIGN_COMMIT (set when running from an exported snapshot), else git's HEAD."""
    if os.environ.get("CAMPAIGN_COMMIT"):
        return os.environ["CAMPAIGN_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "kinesis_src", "lineage"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" plus uncommitted changes to kinesis_src/" if dirty else "")


def document(results: list[scenarios.Result], elapsed_s: float, partial: bool, when: float | None = None) -> str:
    fast = ", ".join(f"{s.name} ({'/'.join(s.fast)})" for s in scenarios.SCENARIOS if s.fast)
    return f"""# Reliability: the fault campaign

This page is generated: `{COMMAND}` reruns every scenario and rewrites it
(about {elapsed_s / 60:.0f} minutes on a 2-core machine; the command is
`{RAW_COMMAND}`, which the Makefile target runs inside the private network
namespace). Last run: {time.strftime('%Y-%m-%d %H:%M', time.localtime(when))} on commit {code_version()},
{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs shared with other
work{', **partial run**' if partial else ''}. Timings vary with the machine's load; the
lost/duplicated/order columns must not.

## How it works

A fault-injecting HTTP/1.1 proxy (`tests/faults/proxy.py`) sits between the
engine and each emulator (kinesis-mock for Kinesis, DynamoDB Local for the
lease table): the engine's `KINESIS_SRC_ENDPOINT_URL` and
`KINESIS_SRC_DYNAMODB_ENDPOINT_URL` point at the proxies, so every AWS call
of the Spark driver, its executors and every consumer worker passes through
them. The proxy matches on `X-Amz-Target` and can answer with an AWS JSON
error, a 5xx, reset the connection in the middle of the body, truncate the
body (full `Content-Length` announced, connection closed early), delay the
call, or forward the call and then reset the connection instead of
answering ("lost response": the write landed, the client does not know).
Each fault fires with a probability, for the next N calls, or for a burst
of T seconds, and is counted (`injected`).

Each scenario (`tests/faults/scenarios.py`) runs on one engine: the Spark
streaming query (`tests/faults/spark_job.py`, its own process, Parquet sink
with a checkpoint, processing-time trigger 500 ms unless said otherwise) or
three consumer workers (`tests/faults/fault_worker.py`, one process each,
failover 3 s, a checkpoint after every batch). A 2-shard stream gets 100
records, then 100 records/s (20 partition keys, each record `key:counter`)
while the fault is on; shard 0 is split 1.5 s into the fault and its upper
child merged with shard 1 at 3.5 s, so every scenario goes through a split
and a merge (restart scenarios reshard while the engine is down). The test's
producer and the reshards bypass the proxies.

Columns:
- **produced**: records Kinesis acknowledged; **delivered**: distinct ones
  the engine delivered (Spark: in committed output, read through the file
  sink's own log); **lost**: produced, never delivered (must be 0).
- **duplicated**: Spark: extra copies of a `(shardId, sequenceNumber)` in the
  committed output (must be 0). Consumer: extra deliveries (at-least-once
  allows the unacknowledged tail); "after an ack" counts deliveries of a
  record after an earlier delivery of it had been checkpointed (verdict
  REDELIVERED: docs/consumer.md promises none), "acked twice" records
  whose checkpoint succeeded after two deliveries (verdict DUPLICATED).
- **out of order**: per-key counter regressions, each record counted at its
  first delivery (parents before children: must be 0 while
  `preserveShardOrder` is on).
- **recover s**: from the end of the fault to the first delivery after it;
  for a killed or stopped consumer worker, from the kill/stop to the first
  delivery of one of its shards by another worker; for restarts, from the
  restart. **catch-up s**: from the last record produced to the moment every
  record was delivered.
- A Spark query that dies is restarted once per death (as an operator or a
  job scheduler would) so loss and duplicates are still measured; the
  death is reported as a failure.

## Results

{table(results)}

## Failures and findings

{details(results)}

## Defects this campaign found

| scenario that found it | defect | fixed in |
|---|---|---|
| kinesis-truncated, both engines | A body cut short (full Content-Length announced) was accepted by botocore and parsed as `{{'message': ...}}`: a `KeyError` escaped `KinesisClient.get_shard_iterator` / `describe_stream` (a consumer worker died at start, the Spark query died in `latestOffset`), `list_shards` returned `[]`, and a cut GetRecords body raised the non-retriable `MalformedResponseError` | 61a35e4 (retriable `TruncatedResponseError` at the AWS boundary) |
| dynamodb-transactions, Spark | `TransactionInProgressException` was not retriable: the task recording its batch's progress failed and the query died | 81dc834 |
| kinesis-5xx, consumer (2 runs in 5) | A merge child's lease, created at one parent's SHARD_END while the other parent (a split child still waiting for its own parent) had no lease, counted the lease-less parent as trimmed: the child was read before that parent, per-key order broke | f6680b3 |
| dynamodb-throttling, consumer (1 run in 3) | A worker whose lease was stolen while its scans stalled still delivered the batches it had fetched, records the thief had already checkpointed (its own checkpoint was rejected: nothing lost, nothing acknowledged twice) | narrowed in 8de4b74 (no delivery from a view older than a thief's patience); closed in 420a1b1 (two-phase steal: the thief requests the lease, the holder releases it at its next scan, force only `failover_s` after the announced request, when a holder that did not see it has a stale view); 0 REDELIVERED in 10 runs, and the fast subset now requires it |
| kinesis-expired-iterator, Spark (1 run in 3) | `ShardReader.fetch` re-acquires an expired iterator once; a second ExpiredIteratorException in a row fails the task and the query (nothing lost on restart) | 82009c7, 39df7ed (up to 10 re-acquisitions, with backoff) |

## In `make test`

`make test` runs `tests/faults/test_fault_proxy.py` (the proxy itself, a few
seconds) and `tests/faults/test_fault_scenarios.py`, the fast subset of these
scenarios: {fast}. It also holds one-call reproductions of the defects
found here (truncated GetRecords and ListShards bodies,
TransactionInProgressException, a merge child read before its lease-less
other parent), now regression tests. A fast scenario fails on any delivery
after an acknowledgement (REDELIVERED). The whole table
above is `{COMMAND}` only.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--engine", choices=sorted(scenarios.ENGINES))
    parser.add_argument("--fast", action="store_true", help="only the scenarios `make test` runs")
    parser.add_argument("--output", default=str(REPO / "docs" / "reliability.md"))
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--render", metavar="JSON", help="only rewrite the page from results saved by --json")
    parser.add_argument("--elapsed", type=float, default=0.0, help="with --render: the run's duration in s")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        fields = set(scenarios.Result.__dataclass_fields__)
        results = [scenarios.Result(**{k: v for k, v in r.items() if k in fields}) for r in saved]
        when = Path(args.render).stat().st_mtime
        Path(args.output).write_text(document(results, args.elapsed, partial=False, when=when))
        print(table(results))
        return 0
    if os.environ.get(launcher.ENV_ISOLATED) != "1":
        print(f"campaign: run inside the private network namespace: {RAW_COMMAND}", file=sys.stderr)
        return 2
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - {s.name for s in scenarios.SCENARIOS}
    if unknown:
        parser.error(f"unknown scenario(s) {sorted(unknown)}; known: {[s.name for s in scenarios.SCENARIOS]}")
    plan = [(s, e) for s in scenarios.SCENARIOS for e in s.engines
            if (only is None or s.name in only) and (args.engine is None or e == args.engine)
            and (not args.fast or e in s.fast)]
    partial = bool(only or args.engine or args.fast)
    began = time.monotonic()
    results: list[scenarios.Result] = []
    workdir = Path(tempfile.mkdtemp(prefix="kinesis-src-campaign-"))
    import kinesis_src

    scenarios.log(f"{len(plan)} runs; work directory {workdir}; measuring {kinesis_src.__file__} ({code_version()})")
    with launcher.Emulators(kinesis=True, dynamodb=True) as emulators:
        os.environ.update(emulators.env())  # dummy credentials and region for this process's own clients
        for scenario, engine in plan:
            results.append(scenarios.run(scenario, engine, emulators.env(), workdir))
            if args.json:
                Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=1, default=str))
    elapsed = time.monotonic() - began
    text = document(results, elapsed, partial)
    if args.output == "-":
        print(table(results))
    else:
        Path(args.output).write_text(text)
        print(table(results))
        scenarios.log(f"wrote {args.output} ({elapsed:.0f}s)")
    return 0 if all(r.verdict == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
