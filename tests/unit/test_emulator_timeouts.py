"""The clients tests use on emulators outwait a loaded machine: LocalStack holds a call while its engine starts.

LocalStack starts its Kinesis engine on an account's first Kinesis call and
holds that call up to its own limit (read from its installed source by
``localstack_ready.engine_start_limit_s``). A client that gives up sooner
retries into a call that is still under way; one whose retry deadline is
shorter than two read timeouts gets no second attempt.
"""

from __future__ import annotations

import localstack_host  # localstack/ is on sys.path (tests/conftest.py)
import localstack_ready
import pytest

from kinesis_src import AwsSettings
from kinesis_src.testing import emulator_settings

pytest_plugins = ["pytester"]


def engine_limit_s() -> float:
    return localstack_ready.engine_start_limit_s(localstack_host.venv_dir())


def check_outwaits_localstack(settings: AwsSettings) -> None:
    assert settings.read_timeout_s > engine_limit_s(), "a call held behind the engine's start would time out"
    assert settings.retry.deadline_s >= 2 * settings.read_timeout_s, "no room for a retry after a timed-out attempt"


def test_the_localstack_and_emulator_settings_outwait_the_engine_start() -> None:
    check_outwaits_localstack(emulator_settings("us-east-1", "http://127.0.0.1:4566"))


def test_the_kits_settings_fixture_outwaits_the_engine_start(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KINESIS_SRC_ENDPOINT_URL", "http://127.0.0.1:4566")  # nothing is called
    pytester.makepyfile(
        "def test_settings(kinesis_test_settings):\n"
        f"    assert kinesis_test_settings.read_timeout_s > {engine_limit_s()!r}\n"
        "    assert kinesis_test_settings.retry.deadline_s >= 2 * kinesis_test_settings.read_timeout_s\n"
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
