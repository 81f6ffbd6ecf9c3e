"""The pytest plugin (entry point ``pytest11``: ``kinesis_src``): fixtures for Kinesis pipelines.

Loaded wherever kinesis-src is installed, so it imports nothing heavy (docs/testing.md).
"""


from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from .endpoints import Endpoints, EndpointsUnavailable, endpoints

if TYPE_CHECKING:
    from .. import AwsSettings
    from ..aws import KinesisClient
    from .producer import KeyedProducer
    from .streams import Resharder, StreamFactory

REQUIRE_OPTION = "--kinesis-require-endpoints"
REQUIRE_INI = "kinesis_require_endpoints"
UNISOLATED_INI = "kinesis_allow_unisolated"
USED_ENDPOINTS = pytest.StashKey["Endpoints"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kinesis_src", "kinesis-src testing kit (kinesis_src.testing)")
    group.addoption(
        REQUIRE_OPTION, action="store_true", default=False,
        help="fail, instead of skipping, tests that need Kinesis endpoints when none are available",
    )
    parser.addini(REQUIRE_INI, type="bool", default=False,
                  help=f"same as {REQUIRE_OPTION}")
    parser.addini(UNISOLATED_INI, type="bool", default=False,
                  help="start the embedded emulators outside a private network namespace (they listen on every "
                       "interface while the tests run); same as KINESIS_SRC_ALLOW_UNISOLATED=1")


def _endpoints_required(config: pytest.Config) -> bool:
    return bool(config.getoption(REQUIRE_OPTION) or config.getini(REQUIRE_INI))


@pytest.fixture(scope="session")
def kinesis_test_endpoints(request: pytest.FixtureRequest) -> Iterator[Endpoints]:
    """The environment's endpoints, or the embedded emulators for the whole session."""
    stack = contextlib.ExitStack()
    try:
        found = stack.enter_context(endpoints(require_isolation=not request.config.getini(UNISOLATED_INI)))
    except EndpointsUnavailable as exc:
        found, reason = None, str(exc)
    if found is None:  # outside the except block, so the report shows the reason once, not a chained copy
        if _endpoints_required(request.config):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    request.config.stash[USED_ENDPOINTS] = found
    with stack:
        yield found


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line naming the endpoints the session's tests used and where they came from."""
    used = config.stash.get(USED_ENDPOINTS, None)
    if used is not None:
        terminalreporter.write_line(
            f"kinesis_src.testing: {used.source} endpoints: Kinesis {used.kinesis}, DynamoDB {used.dynamodb} "
            f"({used.details})")


@pytest.fixture
def kinesis_test_env(kinesis_test_endpoints: Endpoints, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Put the endpoints (and a region and dummy credentials where none are set) into ``os.environ``."""
    env = kinesis_test_endpoints.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if kinesis_test_endpoints.source == "embedded":
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
    return env


@pytest.fixture
def kinesis_test_settings(kinesis_test_endpoints: Endpoints, kinesis_test_env: dict[str, str]) -> AwsSettings:
    """AwsSettings for the endpoints: region, Kinesis and DynamoDB URLs, quick retries, loaded-machine timeouts."""
    from .clients import emulator_settings

    return emulator_settings(kinesis_test_endpoints.region, kinesis_test_endpoints.kinesis, kinesis_test_endpoints.dynamodb)


@pytest.fixture
def kinesis_test_client(kinesis_test_settings: AwsSettings) -> KinesisClient:
    """A KinesisClient for the endpoints (create/put/split/merge/list as well as reads); create/delete retry-safe."""
    from .clients import IdempotentKinesisClient

    return IdempotentKinesisClient(kinesis_test_settings)


@pytest.fixture
def kinesis_stream_factory(kinesis_test_client: KinesisClient, request: pytest.FixtureRequest) -> Iterator[StreamFactory]:
    """``kinesis_stream_factory(shards=1)`` creates a uniquely named ACTIVE stream; all are deleted at teardown."""
    from .streams import StreamFactory

    factory = StreamFactory(kinesis_test_client, hint=request.node.name)
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def kinesis_resharder(kinesis_test_client: KinesisClient) -> Resharder:
    """split / merge / merge_neighbours / scale_to / random_reshards, each waiting for ACTIVE with a deadline."""
    from .streams import Resharder

    return Resharder(kinesis_test_client)


@pytest.fixture
def kinesis_keyed_producer(kinesis_test_client: KinesisClient) -> Callable[..., KeyedProducer]:
    """``kinesis_keyed_producer(stream, keys=20)``: a KeyedProducer; pass it to ``verify_delivery``."""
    from .producer import KeyedProducer

    def make(stream: str, keys: int = 20) -> KeyedProducer:
        return KeyedProducer(kinesis_test_client, stream, keys=keys)

    return make
