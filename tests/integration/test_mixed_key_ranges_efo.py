"""A sticky worker and a worker without a range in EFO mode, on real LocalStack + DynamoDB Local (#11).

One shard, so every unit overlaps it. The worker without a range reads the
whole space alone, under the plain stream consumer; then a sticky worker
claims the middle third (``1/3``): the whole space is split into three units
and the worker without a range reads two of them, both subscribed to the one
shard. AWS allows one subscription per (stream consumer, shard), so each
unit must have a consumer of its own
(:func:`kinesis_src.retrieval.registration.unit_consumer_name`): the stream
lists one consumer per unit read, the two units' readers subscribe under two
ARNs, every record is delivered once, and keys of the sticky range reach the
sticky worker alone once it has started. And the other way round: a worker
without a range that starts when the units exist registers only theirs.

LocalStack does not refuse a second subscription of one consumer to one
shard (checked: two at once, and a third 6 s later, all get events), so on
it the shared consumer shows as the consumer list and the readers' ARNs,
not as subscriptions kicking each other out.
"""

from __future__ import annotations

import os

import pytest
import waiting  # tests/waiting.py
from test_consumer import APP, REPO_ROOT, WorkerProc, deliveries, make_stream
from test_mixed_key_ranges import (
    assert_exactly_once,
    copies_of,
    delivered_all,
    start_while_putting,
    stop_gracefully,
)
from worker_process import spawned  # tests/worker_process.py

from kinesis_src import KeyRange
from kinesis_src.aws import FanOut, KinesisClient
from kinesis_src.config import ENV_ENDPOINT_URL
from kinesis_src.consumer.units import FULL
from kinesis_src.retrieval.registration import unit_consumer_name
from kinesis_src.testing import KeyedProducer
from lineage import hash_key_of

pytestmark = pytest.mark.integration

MIDDLE = KeyRange.slice(1, 3)
LOWER, UPPER = KeyRange(FULL.start, MIDDLE.start - 1), KeyRange(MIDDLE.end + 1, FULL.end)
STICKY_CONSUMER = f"{APP}-middle"


@pytest.fixture
def efo_workers(emulator_env, localstack, tmp_path, request):
    """Worker processes in EFO mode: Kinesis on LocalStack, leases on the session's DynamoDB Local."""
    env = {**os.environ, **emulator_env, ENV_ENDPOINT_URL: localstack, "PYTHONPATH": str(REPO_ROOT),
           "CONSUMER_WORKER_LOG": "INFO"}

    def start(worker_id: str, stream: str, *extra: str) -> WorkerProc:
        return WorkerProc(worker_id, stream, env, tmp_path, "--consumer-mode", "efo", "--idle", "0.1", *extra)

    with spawned(request, start) as started:
        yield started


def consumers_of(kinesis: KinesisClient, stream: str) -> list[str]:
    return sorted(c.name for c in FanOut(kinesis).list_consumers(kinesis.describe_stream(stream).arn))


def reads_two_units(proc: WorkerProc, stream: str) -> dict[str, list[str]] | None:
    """The worker's readers of LOWER and UPPER (key -> [consumer name, arn]), once it has both."""
    reported = proc.of("fan_out")
    readers = reported[-1]["readers"] if reported else {}
    return readers if set(readers) == {f"{stream}@{LOWER}", f"{stream}@{UPPER}"} else None


def test_a_worker_without_a_range_reads_two_units_of_one_shard_under_two_stream_consumers(
    localstack_kinesis: KinesisClient, stream_name: str, efo_workers
) -> None:
    make_stream(localstack_kinesis, stream_name, 1)
    producer = KeyedProducer(localstack_kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    plain = efo_workers("plain", stream_name)
    waiting.wait_for(delivered_all(producer, [plain]), 60, "the worker without a range to read alone", 0.1)
    sticky = efo_workers("sticky", stream_name, "--key-range", "1/3", "--consumer-name", STICKY_CONSUMER)
    cut_over = start_while_putting(producer, sticky)
    readers = waiting.wait_for(lambda: reads_two_units(plain, stream_name), 60, "the two units' readers", 0.1)
    producer.put_rounds(3)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "every record, read by both workers", 0.1)
    stop_gracefully([plain, sticky])

    names = {unit_consumer_name(APP, str(unit), "") for unit in (LOWER, UPPER)}
    assert {name for name, _ in readers.values()} == names
    assert len({arn for _, arn in readers.values()}) == 2, "two units of one worker share a stream consumer"
    # one consumer per unit read: the whole space's (read first), the two units', the sticky range's
    assert consumers_of(localstack_kinesis, stream_name) == sorted({APP, STICKY_CONSUMER} | names)

    delivered = deliveries([plain, sticky])
    assert_exactly_once(copies_of(producer, delivered))
    for d in delivered:
        for key, n, _ in d.records:
            if d.worker == "sticky":
                assert hash_key_of(key) in MIDDLE, f"{key}:{n} is outside the sticky worker's range"
            elif hash_key_of(key) in MIDDLE:
                assert d.t < cut_over, f"{key}:{n} of the sticky range reached the other worker after the cut-over"
    after = [d for d in delivered if d.t > cut_over and d.worker == "plain"]
    assert any(hash_key_of(k) in LOWER for d in after for k, _, _ in d.records)
    assert any(hash_key_of(k) in UPPER for d in after for k, _, _ in d.records)
    assert any(d.worker == "sticky" for d in delivered)


def test_a_worker_without_a_range_that_starts_after_the_split_registers_only_its_units_consumers(
    localstack_kinesis: KinesisClient, stream_name: str, efo_workers
) -> None:
    make_stream(localstack_kinesis, stream_name, 1)
    producer = KeyedProducer(localstack_kinesis, stream_name, keys=30)
    producer.put_rounds(2)
    sticky = efo_workers("sticky", stream_name, "--key-range", "1/3", "--consumer-name", STICKY_CONSUMER)
    waiting.wait_for(sticky.started, 60, "the sticky worker to start", 0.1)
    plain = efo_workers("plain", stream_name)
    readers = waiting.wait_for(lambda: reads_two_units(plain, stream_name), 60, "the two units' readers", 0.1)
    producer.put_rounds(2)
    waiting.wait_for(delivered_all(producer, [plain, sticky]), 90, "every record, read by both workers", 0.1)
    stop_gracefully([plain, sticky])

    names = {unit_consumer_name(APP, str(unit), "") for unit in (LOWER, UPPER)}
    assert {name for name, _ in readers.values()} == names
    assert len({arn for _, arn in readers.values()}) == 2
    assert consumers_of(localstack_kinesis, stream_name) == sorted({STICKY_CONSUMER} | names)  # not the plain name
    delivered = deliveries([plain, sticky])
    assert_exactly_once(copies_of(producer, delivered))
    assert all((hash_key_of(k) in MIDDLE) == (d.worker == "sticky") for d in delivered for k, _, _ in d.records)
