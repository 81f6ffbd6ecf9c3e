"""The testing kit used the way a user uses it: through its pytest plugin, against real emulators.

Every fixture here (``kinesis_stream_factory``, ``kinesis_resharder``,
``kinesis_keyed_producer``, ``kinesis_test_client``...) comes from
``kinesis_src.testing.plugin``, loaded through the ``pytest11`` entry point,
not from tests/conftest.py. Without endpoints in the environment the plugin
starts the embedded emulators itself, so run this file as::

    python localstack/launcher.py isolated -- python -m pytest tests/integration/test_testing_kit_pipelines.py
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from kinesis_src import Consumer, LeaseTiming, Record, read_table
from kinesis_src.aws import KinesisClient
from kinesis_src.testing import (
    AT_LEAST_ONCE,
    DeliveryError,
    KeyedProducer,
    Resharder,
    StreamFactory,
    verify_delivery,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

PLUGIN_FIXTURES = ("kinesis_test_endpoints", "kinesis_test_client", "kinesis_stream_factory",
                   "kinesis_resharder", "kinesis_keyed_producer")


class KeyedStream(NamedTuple):
    """A fresh two-shard stream and the keyed-counter producer that already put some rounds into it."""

    name: str
    producer: KeyedProducer


@pytest.fixture
def keyed_stream(
    kinesis_stream_factory: StreamFactory, kinesis_keyed_producer: Callable[..., KeyedProducer]
) -> Callable[..., KeyedStream]:
    """``keyed_stream(keys, rounds)``: what every pipeline test here starts from, built from the plugin's fixtures."""

    def make(keys: int, rounds: int) -> KeyedStream:
        stream = kinesis_stream_factory(shards=2)
        producer = kinesis_keyed_producer(stream, keys=keys)
        producer.put_rounds(rounds)
        return KeyedStream(stream, producer)

    return make


def test_the_fixtures_come_from_the_plugin(request: pytest.FixtureRequest, kinesis_stream_factory: StreamFactory,
                                           kinesis_resharder: Resharder, kinesis_keyed_producer: Callable) -> None:
    definitions = request.node._fixtureinfo.name2fixturedefs
    for name in PLUGIN_FIXTURES:
        assert definitions[name][-1].func.__module__ == "kinesis_src.testing.plugin", name


def test_a_read_table_pipeline_through_a_split_and_a_merge_is_exactly_once(
    keyed_stream: Callable[..., KeyedStream], kinesis_resharder: Resharder, kinesis_test_client: KinesisClient
) -> None:
    stream, producer = keyed_stream(keys=20, rounds=3)
    split = kinesis_resharder.split(stream, "shardId-000000000000")
    assert split.parents == ("shardId-000000000000",) and len(split.children) == 2
    producer.put_rounds(3)
    merge = kinesis_resharder.merge(stream, split.children[1], "shardId-000000000001")
    assert merge.parents == (split.children[1], "shardId-000000000001") and len(merge.children) == 1
    producer.put_rounds(3)
    assert [s.shard_id for s in kinesis_resharder.open_shards(stream)] == [split.children[0], merge.children[0]]

    table = read_table(stream, kinesis=kinesis_test_client)  # the "pipeline": a batch read into a table

    report = verify_delivery(table, producer)
    assert (report.delivered, report.keys, report.extra_deliveries) == (180, 20, 0)
    # The same rows, children before parents, are what a reader that ignores lineage would emit:
    child_first = sorted(table.to_pylist(), key=lambda row: row["shardId"], reverse=True)
    with pytest.raises(DeliveryError, match=r"FAILED: \d+ out of order"):
        verify_delivery(child_first, producer)


def test_a_consumer_pipeline_through_random_reshards_keeps_per_key_order(
    keyed_stream: Callable[..., KeyedStream], kinesis_resharder: Resharder, kinesis_test_env: dict[str, str]
) -> None:
    """A Consumer writing to a list (the user's sink) while the stream is split and merged at random, seed 7."""
    stream, producer = keyed_stream(keys=10, rounds=2)
    steps = kinesis_resharder.random_reshards(stream, seed=7, steps=4, min_shards=1, max_shards=4,
                                              between=lambda step: producer.put_rounds(2))
    assert [step.kind for step in steps].count("split") >= 1 and [step.kind for step in steps].count("merge") >= 1, steps
    steps += kinesis_resharder.scale_to(stream, 3)
    producer.put_rounds(2)
    assert len(kinesis_resharder.open_shards(stream)) == 3

    sink: list[Record] = []

    async def pipeline() -> None:
        timing = LeaseTiming(failover_s=3, renew_interval_s=1, scan_interval_s=0.25)
        async with Consumer(stream, application_name=f"kit-{stream}"[:100], lease_timing=timing,
                            idle_interval_s=0.1, handle_signals=False) as consumer:
            async for batch in consumer:
                sink.extend(batch.records)
                await batch.checkpoint()
                if len(sink) >= producer.acknowledged:
                    return

    asyncio.run(asyncio.wait_for(pipeline(), timeout=120))
    verify_delivery(sink, producer)  # exactly once: one worker, nothing failed
    assert verify_delivery(sink + sink[:5], producer, AT_LEAST_ONCE).extra_deliveries == 5


def test_scaling_with_update_shard_count(
    keyed_stream: Callable[..., KeyedStream], kinesis_resharder: Resharder, kinesis_test_client: KinesisClient
) -> None:
    stream, producer = keyed_stream(keys=10, rounds=2)
    (step,) = kinesis_resharder.scale_to(stream, 4, method="update_shard_count")
    assert step.kind == "update_shard_count" and len(step.children) == 4 and len(step.parents) == 2
    producer.put_rounds(2)
    assert kinesis_resharder.scale_to(stream, 4, method="update_shard_count") == []
    verify_delivery(read_table(stream, kinesis=kinesis_test_client), producer)


def test_the_documented_example_passes_against_endpoints_from_the_environment(kinesis_test_env: dict[str, str]) -> None:
    """examples/test_user_pipeline.py in a pytest of its own, given this session's endpoints in the environment.

    So the plugin's other path runs too: endpoints named by
    ``KINESIS_SRC_ENDPOINT_URL`` are used as they are, nothing is started.
    """
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "examples/test_user_pipeline.py", "-q", "-p", "no:cacheprovider",
         "--kinesis-require-endpoints"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout


def test_our_own_emulator_fixtures_are_the_kits(
    emulators: object, emulator_env: dict[str, str], kinesis: KinesisClient,
    kinesis_test_endpoints: object, kinesis_test_env: dict[str, str], kinesis_test_client: KinesisClient,
) -> None:
    """tests/conftest.py's ``emulators``/``emulator_env``/``kinesis`` adapt the plugin's fixtures: one emulator
    pair per session, started by the kit, under every emulator test of the project."""
    assert emulators.endpoints is kinesis_test_endpoints  # type: ignore[attr-defined]
    assert emulator_env is kinesis_test_env and kinesis is kinesis_test_client
    assert os.environ["KINESIS_SRC_ENDPOINT_URL"] == emulators.kinesis_endpoint == kinesis.endpoint  # type: ignore[attr-defined]
