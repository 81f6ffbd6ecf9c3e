"""The Spark source on LocalStack itself (host mode): a polling AvailableNow query through a split and a merge.

The same workload and checks as the EFO query in test_efo.py, on the
default polling path: every user record exactly once, in per-key order,
across several micro-batches. Kinesis is LocalStack's, the lease table
DynamoDB Local's.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from kpl import check_user_records, produce_through_split_and_merge, records_of_rows

from kinesis_src import KinesisClient, Record

pytestmark = pytest.mark.integration


def test_a_polling_query_on_localstack_is_exactly_once_in_key_order(
    spark, localstack_kinesis: KinesisClient, localstack: str, emulators: Any, stream_name: str, tmp_path: Path
) -> None:
    producer = produce_through_split_and_merge(localstack_kinesis, stream_name)
    attempts: dict[int, list[list[Record]]] = defaultdict(list)
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        rows = records_of_rows(df.collect())
        with lock:
            attempts[batch_id].append(rows)

    options = {
        "endpointUrl": localstack, "dynamodbEndpointUrl": emulators.dynamodb_endpoint, "streamName": stream_name,
        "initialPosition": "trim_horizon", "applicationName": f"compat-{stream_name}"[:100], "maxRecordsPerShard": "7",
    }
    reader = spark.readStream.format("kinesis")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load().writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(300), "AvailableNow query did not stop by itself"
    assert query.exception() is None, query.exception()
    batches = [attempts[b][0] for b in sorted(attempts)]
    check_user_records([r for rows in batches for r in rows], producer, hash_keys=False)
    assert len(batches) > 1
