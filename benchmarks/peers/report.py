"""Render docs/peers.md from benchmarks/peers/out/results.json (placeholder until the doc generator lands)."""

from __future__ import annotations

import json


def render(results: dict) -> str:
    return "```\n" + json.dumps(results, indent=1, default=str) + "\n```\n"
