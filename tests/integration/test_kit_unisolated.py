"""The kit on a machine without network namespaces: ``KINESIS_SRC_ALLOW_UNISOLATED`` starts the emulators anyway.

Each case runs a user's pytest in a child process whose environment looks
like such a machine's (no ``KINESIS_SRC_ISOLATED``, no endpoint variables).
The child still runs inside this test's private namespace, so the servers
it starts, which listen on every interface, stay unreachable from outside.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["pytester"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("KINESIS_SRC_ISOLATED") != "1",
                       reason="starts servers that listen on all interfaces: run under "
                              "`python localstack/launcher.py isolated -- pytest`"),
]

USER_TEST = """
def test_a_stream_on_the_embedded_emulators(kinesis_stream_factory, kinesis_test_client, kinesis_test_endpoints):
    assert kinesis_test_endpoints.source == "embedded"
    stream = kinesis_stream_factory(shards=1)
    assert [shard["ShardId"] for shard in kinesis_test_client.list_shards(stream)] == ["shardId-000000000000"]
"""


@pytest.fixture
def machine_without_namespaces(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("KINESIS_SRC_ISOLATED", "KINESIS_SRC_ALLOW_UNISOLATED", "KINESIS_SRC_ENDPOINT_URL",
                 "KINESIS_SRC_DYNAMODB_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_KINESIS",
                 "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_TEST)
    return pytester


def test_without_the_opt_in_the_kit_refuses_and_names_it(machine_without_namespaces: pytest.Pytester) -> None:
    result = machine_without_namespaces.runpytest_subprocess("--kinesis-require-endpoints", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*KINESIS_SRC_ISOLATED=1 is not set*KINESIS_SRC_ALLOW_UNISOLATED=1*"])


@pytest.mark.parametrize("opt_in", ["environment", "ini"])
def test_the_opt_in_starts_the_embedded_emulators(machine_without_namespaces: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch, opt_in: str) -> None:
    if opt_in == "environment":
        monkeypatch.setenv("KINESIS_SRC_ALLOW_UNISOLATED", "1")
    else:
        machine_without_namespaces.makeini("[pytest]\nkinesis_allow_unisolated = true\n")
    result = machine_without_namespaces.runpytest_subprocess("--kinesis-require-endpoints", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kinesis_src.testing: embedded endpoints: Kinesis http://127.0.0.1:*"
                                 "kinesis-mock and DynamoDB Local started by *kinesis_src/testing/emulators*"])
