"""What a Spark Connect client sees when the server's Python lacks kinesis-src, and what shipping it from the client does.

The server finds ``format("kinesis")`` by scanning its own Python for
``pyspark_kinesis``; a client cannot change that. ``register`` from the
client sends the class by reference, so the server must import it. A zip
added with ``spark.addArtifacts(..., pyfile=True)`` reaches the session's
batch planning and tasks, but not the process that plans a streaming
query's micro-batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinesis_src import KinesisDataSource
from kinesis_src.testing import verify_delivery

pytestmark = pytest.mark.integration

MISSING = "No module named 'kinesis_src'"


@pytest.mark.parametrize("api", ["read", "readStream"])
def test_format_by_name_is_data_source_not_found(bare_spark: Any, api: str) -> None:
    reader = getattr(bare_spark, api).format("kinesis").option("streamName", "s")
    with pytest.raises(Exception) as info:
        reader.load().schema  # noqa: B018 - Connect plans lazily: the schema asks the server
    message = str(info.value)
    assert "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: kinesis." in message, message[:2000]


def test_register_from_the_client_does_not_ship_the_package(bare_spark: Any) -> None:
    bare_spark.dataSource.register(KinesisDataSource)  # accepted: only a reference to the class travels
    with pytest.raises(Exception) as info:
        bare_spark.read.format("kinesis").option("streamName", "s").load().schema  # noqa: B018
    message = str(info.value)
    assert "PYTHON_DATA_SOURCE_ERROR" in message and MISSING in message, message[:2000]


def test_a_zip_added_as_artifact_serves_batch_reads_but_not_streaming_queries(
    bare_spark: Any, source_zip: Path, kinesis_stream_factory: Any, kinesis_keyed_producer: Any, tmp_path: Path,
) -> None:
    stream = kinesis_stream_factory(1)
    producer = kinesis_keyed_producer(stream, keys=5)
    producer.put_rounds(2)
    bare_spark.addArtifacts(str(source_zip), pyfile=True)
    bare_spark.dataSource.register(KinesisDataSource)

    rows = bare_spark.read.format("kinesis").option("streamName", stream).load().collect()
    verify_delivery(rows, producer)

    query = (
        bare_spark.readStream.format("kinesis").option("streamName", stream)
        .option("initialPosition", "trim_horizon").option("applicationName", f"bare-{stream}").load()
        .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(120)
    finally:
        query.stop()
    message = str(info.value)
    assert "STREAM_FAILED" in message and MISSING in message, message[:2000]
