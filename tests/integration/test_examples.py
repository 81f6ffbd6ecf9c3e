"""The examples run as documented (`make demo-consumer`, `make demo-efo`, the processing and key-range examples), so they cannot rot unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_consumer_etl_example_passes_its_own_order_check(emulator_env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "consumer_etl.py"), "--workers", "2", "--records", "400"],
        env={**emulator_env, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "per-key order check: OK" in result.stdout
    assert "missing           0" in result.stdout and "duplicates        0" in result.stdout


def test_efo_example_reads_with_two_applications_and_deregisters_them(localstack: str, emulators) -> None:  # noqa: ANN001
    env = {**emulators.env(), "KINESIS_SRC_ENDPOINT_URL": localstack,
           "KINESIS_SRC_DYNAMODB_ENDPOINT_URL": emulators.dynamodb_endpoint, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "efo_consumers.py")], env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "stream consumers while reading: ['audit', 'billing']" in result.stdout
    assert "consumers deregistered: OK" in result.stdout and result.stdout.count("duplicates        0") == 2


def run_example(name: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        env={**env, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=240,
    )


def test_parallel_processing_example_dead_letters_the_rejects_and_keeps_key_order(emulator_env: dict[str, str]) -> None:
    result = run_example("parallel_processing.py", emulator_env, "--records", "400")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "missing           0" in result.stdout
    assert "per-key order check: OK" in result.stdout


def test_key_range_workers_example_delivers_each_record_once_and_each_key_to_one_worker(
    emulator_env: dict[str, str],
) -> None:
    result = run_example("key_range_workers.py", emulator_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "0 twice; 0 keys seen by more than one worker -> OK" in result.stdout
