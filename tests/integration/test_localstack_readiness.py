"""LocalStack is ready only once its Kinesis engine answers, however slowly (a loaded machine, made deterministic).

LocalStack starts its Kinesis engine on the first Kinesis call. The
``KINESIS_SRC_LOCALSTACK_SLOW_KINESIS_S`` knob of ``localstack_host.py`` makes
every Kinesis call that reaches the engine that much later, the first one
included, as a busy machine does.
"""

from __future__ import annotations

import os

import launcher  # localstack/ is on sys.path (tests/conftest.py)
import localstack_host
import pytest
from localstack_credentials import use_localstack_credentials

from kinesis_src import AwsSettings
from kinesis_src.aws import KinesisClient
from kinesis_src.retry import NO_RETRY

pytestmark = pytest.mark.integration

SLOW_S = 3.0  # longer than the launcher's quick probe (2 s) waits for an answer


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dummy key the readiness probe signs with (LocalStack's account 000000000000)."""
    use_localstack_credentials(monkeypatch)


def test_localstack_is_ready_only_once_its_kinesis_engine_answers_even_when_every_answer_is_slow(
    monkeypatch: pytest.MonkeyPatch, credentials: None, stream_name: str,
) -> None:
    """Every Kinesis answer takes longer than a quick probe waits: start() still returns, with the engine up."""
    if os.environ.get(launcher.ENV_ISOLATED) != "1":  # its kinesis-mock binds all interfaces
        pytest.skip("run under `python localstack/launcher.py isolated -- pytest` (what `make test` does)")
    if not localstack_host.is_installed():
        pytest.skip("LocalStack is not installed (needs Python 3.13): run `make setup`")
    monkeypatch.setenv(localstack_host.ENV_SLOW_KINESIS, str(SLOW_S))
    with localstack_host.LocalStack(startup_timeout=60.0) as running:
        assert running.startup_seconds >= SLOW_S
        assert running.log_path is not None
        assert "Creating kinesis backend for account 000000000000" in running.log_path.read_text()
        first = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=running.endpoint, retry=NO_RETRY,
                                          read_timeout_s=SLOW_S + 5.0))
        first.create_stream(stream_name, 1)  # one attempt: the engine is there, only slow
        assert first.describe_stream(stream_name).status == "ACTIVE"
