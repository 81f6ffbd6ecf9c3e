"""The testing kit's stream helpers when an attempt lands but its answer is lost (a loaded emulator).

moto's server behind the fault proxy (tests/faults/proxy.py): a ``lost``
fault forwards the call, so it takes effect, then resets the connection
instead of answering, as a read timeout does on a machine too busy to
answer in time. The client retries; the retry meets what the first attempt
did (ResourceInUseException "already exists", ResourceNotFoundException on
a delete). Loopback only: no emulator, no isolation needed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from proxy import KINESIS, LOST_RESPONSE, Fault, FaultProxy  # noqa: E402  (tests/faults has no __init__.py)

from kinesis_src import AwsSettings  # noqa: E402
from kinesis_src.aws import KinesisClient  # noqa: E402
from kinesis_src.errors import InvalidRequestError, StreamNotFoundError  # noqa: E402
from kinesis_src.retry import RetryPolicy  # noqa: E402
from kinesis_src.testing import StreamFactory  # noqa: E402

pytest_plugins = ["pytester"]

FAST = RetryPolicy(max_attempts=4, initial_backoff_s=0.01, max_backoff_s=0.05)


@pytest.fixture
def proxy(moto_iam_server: str, dummy_credentials: None) -> Iterator[FaultProxy]:
    """The fault proxy before moto's threaded server (tests/moto_iam.py: IAM stays off, nothing calls grant)."""
    with FaultProxy(moto_iam_server, name="moto-proxy") as running:
        yield running


def client(url: str) -> KinesisClient:
    return KinesisClient(AwsSettings(region="us-east-1", endpoint_url=url, retry=FAST, read_timeout_s=5.0))


def lose_next(proxy: FaultProxy, operation: str) -> Fault:
    return proxy.plan.add(Fault(f"lost-{operation}", LOST_RESPONSE, (KINESIS + operation,), count=1))


def test_a_create_whose_answer_was_lost_after_it_landed_gives_the_stream(proxy: FaultProxy) -> None:
    lost = lose_next(proxy, "CreateStream")
    factory = StreamFactory(client(proxy.url), hint="lost-create")
    name = factory.create(shards=2)
    assert lost.injected == 1 and proxy.plan.requests[KINESIS + "CreateStream"] == 2  # the retry met the stream
    summary = client(proxy.url).describe_stream(name)
    assert (summary.status, summary.open_shard_count) == ("ACTIVE", 2)


def test_a_name_already_taken_still_fails_when_no_attempt_went_unanswered(proxy: FaultProxy) -> None:
    kinesis = client(proxy.url)
    factory = StreamFactory(kinesis, hint="taken")
    name = factory.create(shards=1)
    with pytest.raises(InvalidRequestError, match="ResourceInUseException"):
        factory.create(shards=1, name=name)
    assert proxy.plan.requests[KINESIS + "CreateStream"] == 2  # one attempt each: nothing was retried


def test_a_delete_whose_answer_was_lost_is_done(proxy: FaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    kinesis = client(proxy.url)
    factory = StreamFactory(kinesis, hint="lost-delete")
    name = factory.create(shards=1)
    lost = lose_next(proxy, "DeleteStream")
    with caplog.at_level(logging.WARNING, logger="kinesis_src.testing"):
        factory.cleanup()
    assert lost.injected == 1 and proxy.plan.requests[KINESIS + "DeleteStream"] == 2
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kinesis_src.testing")] == []
    with pytest.raises(StreamNotFoundError):
        kinesis.describe_stream(name)


def test_the_kit_client_creates_and_deletes_through_lost_answers(
    pytester: pytest.Pytester, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kinesis_test_client`` (what the ``kinesis`` and LocalStack fixtures rest on) as a test gets it."""
    monkeypatch.setenv("KINESIS_SRC_ENDPOINT_URL", proxy.url)
    lost = [lose_next(proxy, "CreateStream"), lose_next(proxy, "DeleteStream")]
    pytester.makepyfile(
        "def test_create_then_delete(kinesis_test_client):\n"
        "    kinesis_test_client.create_stream('kit-client', 1)\n"
        "    assert kinesis_test_client.wait_active('kit-client').open_shard_count == 1\n"
        "    kinesis_test_client.delete_stream('kit-client')\n"
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert [fault.injected for fault in lost] == [1, 1]
