"""Shared fixtures: dummy credentials, and the emulator fixtures, which rest on our own testing kit.

``emulators``, ``emulator_env`` and ``kinesis`` are thin adapters over the
kit's ``kinesis_test_endpoints``, ``kinesis_test_env`` and
``kinesis_test_client`` (:mod:`kinesis_src.testing.plugin`, loaded through
its ``pytest11`` entry point): one kinesis-mock + DynamoDB Local pair per
session, started and stopped by the kit, so every emulator test exercises
the kit's endpoint path too.

The emulators bind all interfaces (neither kinesis-mock nor DynamoDB Local has
a host option), so tests that use them run only inside the private network
namespace that `python localstack/launcher.py isolated -- ...` creates (the
README's test command does this); elsewhere they are skipped with that
instruction.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import settings

# Hypothesis: CI runs a fixed set of examples (derandomized), so a new random
# counterexample cannot fail a landing. Explore locally with
# HYPOTHESIS_PROFILE=explore (random seeds, more examples), and pin every
# counterexample found with @example.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "localstack"))
import launcher  # noqa: E402  (localstack/ has no __init__.py on purpose)

from kinesis_src.aws import KinesisClient  # noqa: E402
from kinesis_src.testing import Endpoints, IdempotentKinesisClient, emulator_settings  # noqa: E402
from moto_iam import iam_moto, moto_iam_server  # noqa: E402, F401  (fixtures: moto with IAM enforced, tests/moto_iam.py)
from thread_leaks import no_leaked_lease_threads  # noqa: E402, F401  (autouse: a test may not leave lease threads running)

_names = itertools.count()
# LocalStack's start on a loaded machine: its gateway, then its Kinesis engine (up to a minute by itself).
LOCALSTACK_STARTUP_S = 240.0


def _require_isolation() -> None:
    if os.environ.get(launcher.ENV_ISOLATED) != "1":
        pytest.skip(
            "emulator servers bind all interfaces: run under "
            "`python localstack/launcher.py isolated -- pytest` (what `make test` does)"
        )


@dataclass(frozen=True)
class SessionEmulators:
    """The kit's session endpoints under the launcher's names (``kinesis_endpoint``, ``dynamodb_endpoint``, ``env()``).

    What tests written against ``launcher.Emulators`` read from the
    ``emulators`` fixture, so they run unchanged on the kit's endpoints.
    """

    endpoints: Endpoints

    @property
    def kinesis_endpoint(self) -> str:
        return self.endpoints.kinesis

    @property
    def dynamodb_endpoint(self) -> str:
        return self.endpoints.dynamodb

    def env(self) -> dict[str, str]:
        """Endpoints, region and dummy credentials, as ``launcher.Emulators.env()`` gives them."""
        return self.endpoints.env()


@pytest.fixture(scope="session")
def emulators(request: pytest.FixtureRequest) -> SessionEmulators:
    """The kit's ``kinesis_test_endpoints`` (its emulators, started once per session), isolation checked first.

    Requested by name after the check, so outside ``launcher.py isolated`` these
    tests skip with the launcher's instruction instead of failing on the kit's
    ``kinesis_require_endpoints`` (setup.cfg).
    """
    _require_isolation()
    return SessionEmulators(request.getfixturevalue("kinesis_test_endpoints"))


@pytest.fixture(scope="session")
def localstack() -> Iterator[str]:
    """Real LocalStack (host mode, Kinesis only) for enhanced fan-out; yields its endpoint URL.

    kinesis-mock cannot serve SubscribeToShard to botocore, so EFO tests need
    LocalStack itself (``localstack/localstack_host.py``: ~5 s to start,
    ~600 MB with its kinesis-mock). Started on first use, once per session.
    """
    _require_isolation()
    import localstack_host  # noqa: PLC0415  (localstack/ is on sys.path, see above)

    if not localstack_host.is_installed():
        pytest.skip(
            "LocalStack is not installed (needs Python 3.13): run `make setup` or "
            "`python localstack/localstack_host.py install` outside the isolated namespace"
        )
    with localstack_host.LocalStack(startup_timeout=LOCALSTACK_STARTUP_S) as running:
        yield running.endpoint


@pytest.fixture
def localstack_kinesis(localstack: str, monkeypatch: pytest.MonkeyPatch) -> KinesisClient:
    """A KinesisClient for LocalStack (us-east-1, dummy credentials): the kit's loaded-machine timeouts, and
    create/delete that survive a retry whose first attempt landed unanswered."""
    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return IdempotentKinesisClient(emulator_settings("us-east-1", localstack))


@pytest.fixture
def emulator_env(emulators: SessionEmulators, kinesis_test_env: dict[str, str]) -> dict[str, str]:
    """The kit's ``kinesis_test_env``: endpoints, region and dummy credentials, set in ``os.environ`` for the test."""
    return kinesis_test_env


@pytest.fixture
def kinesis(emulator_env: dict[str, str], kinesis_test_client: KinesisClient) -> KinesisClient:
    """The kit's ``kinesis_test_client``: the session's Kinesis, retries kept short."""
    return kinesis_test_client


@pytest.fixture
def stream_name(request: pytest.FixtureRequest) -> str:
    """A fresh stream per test: kinesis-mock's put speed falls as one stream fills."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:80]
    return f"{base}-{next(_names)}"


@pytest.fixture
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for moto and the emulators; never real ones."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
