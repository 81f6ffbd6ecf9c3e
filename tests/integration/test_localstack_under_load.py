"""LocalStack on a loaded machine, made deterministic: a call carried out whose answer never arrives.

On a busy machine LocalStack can carry a call out and answer after the
client gave up; the retry then meets what the first attempt did. The fault
proxy's ``lost`` fault (tests/faults/proxy.py) does exactly that: it
forwards the call, then resets the connection instead of answering. Slow
answers at start-up are in test_localstack_readiness.py.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from localstack_credentials import use_localstack_credentials

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from proxy import KINESIS, LOST_RESPONSE, Fault, FaultProxy  # noqa: E402  (tests/faults has no __init__.py)

from kinesis_src.aws import FanOut, KinesisClient  # noqa: E402
from kinesis_src.errors import StreamNotFoundError  # noqa: E402
from kinesis_src.testing import IdempotentKinesisClient, emulator_settings  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dummy key the launcher's probes sign with (LocalStack's account 000000000000)."""
    use_localstack_credentials(monkeypatch)


@pytest.fixture
def proxy(localstack: str, credentials: None) -> Iterator[FaultProxy]:
    """A fault proxy in front of the session's LocalStack."""
    with FaultProxy(localstack, name="localstack-proxy") as running:
        yield running


def lose_next(proxy: FaultProxy, operation: str) -> Fault:
    return proxy.plan.add(Fault(f"lost-{operation}", LOST_RESPONSE, (KINESIS + operation,), count=1))


def test_a_create_and_a_delete_whose_answers_are_lost_on_localstack_are_done(
    proxy: FaultProxy, localstack: str, stream_name: str,
) -> None:
    kinesis = IdempotentKinesisClient(emulator_settings("us-east-1", proxy.url))
    lost = [lose_next(proxy, "CreateStream")]
    kinesis.create_stream(stream_name, 2)
    assert kinesis.wait_active(stream_name).open_shard_count == 2
    lost.append(lose_next(proxy, "DeleteStream"))
    kinesis.delete_stream(stream_name)
    assert [fault.injected for fault in lost] == [1, 1]
    assert proxy.plan.requests[KINESIS + "CreateStream"] == 2 and proxy.plan.requests[KINESIS + "DeleteStream"] == 2
    direct = KinesisClient(emulator_settings("us-east-1", localstack))
    with pytest.raises(StreamNotFoundError):
        direct.describe_stream(stream_name)


def test_register_and_deregister_whose_answers_are_lost_on_localstack_leave_one_consumer_then_none(
    proxy: FaultProxy, stream_name: str,
) -> None:
    """FanOut's own calls (what the Consumer and the Spark source use) are idempotent under such a retry."""
    kinesis = IdempotentKinesisClient(emulator_settings("us-east-1", proxy.url))
    kinesis.create_stream(stream_name, 1)
    arn = kinesis.wait_active(stream_name).arn
    fanout = FanOut(kinesis)
    lost = [lose_next(proxy, "RegisterStreamConsumer")]
    consumer = fanout.register_consumer(arn, "lost-answers")
    assert consumer.status == "ACTIVE"
    assert [c.arn for c in fanout.list_consumers(arn)] == [consumer.arn]
    lost.append(lose_next(proxy, "DeregisterStreamConsumer"))
    fanout.deregister_consumer(consumer.arn)  # False here: the retry found it gone, which is the point
    assert [fault.injected for fault in lost] == [1, 1]
    assert fanout.list_consumers(arn) == []


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("efo_consumers_example", ROOT / "examples" / "efo_consumers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_efo_examples_stream_is_created_through_a_lost_answer(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch, stream_name: str,
) -> None:
    monkeypatch.setenv("KINESIS_SRC_ENDPOINT_URL", proxy.url)
    lost = lose_next(proxy, "CreateStream")
    kinesis = load_example().admin_client()
    kinesis.create_stream(stream_name, 2)
    assert kinesis.wait_active(stream_name).open_shard_count == 2
    assert lost.injected == 1 and proxy.plan.requests[KINESIS + "CreateStream"] == 2
