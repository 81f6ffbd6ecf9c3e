"""A restart whose uncommitted batch resumes after an expired record fails with DataLossError (issue #23 item 3).

On a restart Spark re-runs the batch it planned but never committed before
it asks the source for anything else. Here that batch resumes after a
sequence number older than the oldest record the shard still holds, which
is what the checkpoint looks like once the records after it expired. The
stream is the benchmark replay endpoint (benchmarks/replay_endpoint.py):
like Kinesis, and unlike kinesis-mock, it reads AFTER a sequence number that
is no longer there from the oldest record left, so without the check the
re-run loses the records in between silently.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path

import pytest
from spark_versions import until_drained  # tests/spark_versions.py

from kinesis_src.positions import Position, PositionKind
from kinesis_src.spark.offsets import Plan

pytestmark = pytest.mark.integration

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_endpoint.py"
_spec = importlib.util.spec_from_file_location("replay_endpoint", _PATH)
replay = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("replay_endpoint", replay)  # dataclasses resolve annotations through sys.modules
_spec.loader.exec_module(replay)

SHARD = "shardId-000000000000"


def start(spark, endpoint, dynamodb: str, application: str, checkpoint: Path, rows: list):
    """An AvailableNow query of the endpoint's stream, 4 records per shard and batch, into ``rows``."""
    def collect(df, batch_id: int) -> None:
        rows.extend(r.sequenceNumber for r in df.select("sequenceNumber").collect())

    return (
        spark.readStream.format("kinesis").option("streamName", endpoint.stream_name)
        .option("endpointUrl", endpoint.endpoint_url).option("dynamodbEndpointUrl", dynamodb)
        .option("initialPosition", "trim_horizon").option("applicationName", application)
        .option("fetchIntervalMs", "0").option("maxRecordsPerShard", "4").load()
        .writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )


def uncommit(checkpoint: Path, batch_id: int) -> Path:
    """Forget Spark's batches after ``batch_id`` and its commit: the checkpoint of a driver that died running it."""
    for log in ("offsets", "commits"):
        for path in (checkpoint / log).iterdir():
            name = path.name.removeprefix(".").removesuffix(".crc")  # Hadoop's checksum beside each file
            number = int(name) if name.isdigit() else -1
            if number > batch_id or (log == "commits" and number == batch_id):
                path.unlink()
    return checkpoint / "offsets" / str(batch_id)


def resume_after(offset_file: Path, sequence_number: str) -> None:
    """The logged batch's shard resumes after ``sequence_number`` instead (lines: version, metadata, offset)."""
    version, metadata, text = offset_file.read_text().splitlines()
    offset = json.loads(text)
    plan = Plan.from_offset(offset)
    assert plan.read == [SHARD] and plan.shards[SHARD].start.kind is PositionKind.AFTER_SEQUENCE_NUMBER
    offset["shards"][SHARD]["start"] = Position.after_sequence(sequence_number).to_dict()
    offset_file.write_text("\n".join([version, metadata, json.dumps(offset)]))
    offset_file.with_name(f".{offset_file.name}.crc").unlink(missing_ok=True)  # it checksums the old text


def test_a_restart_whose_uncommitted_batch_resumes_after_an_expired_record_fails_with_data_loss(
    spark, emulators, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    application = f"replay-trim-{uuid.uuid4().hex[:8]}"
    with replay.ReplayEndpoint(shards=1, records_per_shard=12, size=20, mode="thread") as endpoint:
        shard = endpoint.stream.shards[0]
        rows: list = []
        until_drained(lambda: start(spark, endpoint, emulators.dynamodb_endpoint, application, tmp_path / "cp", rows),
                      lambda: len(rows), timeout_s=180)
        assert len(rows) == 12

        expired = str(shard.starting_sequence + 1)  # older than record 0, the oldest the shard holds
        resume_after(uncommit(tmp_path / "cp", batch_id=2), expired)
        rows = []
        again = start(spark, endpoint, emulators.dynamodb_endpoint, application, tmp_path / "cp", rows)
        with pytest.raises(StreamingQueryException) as info:  # awaitTermination raises the query's failure
            again.awaitTermination(180)
    message = str(info.value)
    assert "DataLossError" in message and SHARD in message, message
    assert expired in message and shard.sequence_number(0) in message, message
    assert rows == []  # failed before a task read anything
