"""The consumer example runs as documented (`make demo-consumer`), so it cannot rot unnoticed."""

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
