"""Read back the delivery logs (sink.py) of one run: every line of every worker, in time order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Delivery:
    """One record as a processor received it."""

    at: float
    shard: str
    sequence: str
    key: str
    head: str
    worker: str  # from the file name, <worker>-<pid>.tsv


def read(sink: Path) -> list[Delivery]:
    """All complete lines under ``sink``, sorted by delivery time (a file's order is kept on ties)."""
    out: list[Delivery] = []
    for path in sorted(sink.glob("*.tsv")):
        worker = path.stem.rsplit("-", 1)[0]
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a line cut by a SIGKILL
                parts = line[:-1].split("\t")
                if len(parts) == 5:
                    out.append(Delivery(float(parts[0]), parts[1], parts[2], parts[3], parts[4], worker))
    out.sort(key=lambda d: d.at)
    return out


def count(sink: Path) -> int:
    """Complete lines so far (cheap enough to poll: counts newlines)."""
    total = 0
    for path in sink.glob("*.tsv"):
        with open(path, "rb") as f:
            total += f.read().count(b"\n")
    return total


def first_delivery(sink: Path) -> float | None:
    """The earliest delivery time written so far, or None."""
    first = None
    for path in sink.glob("*.tsv"):
        with open(path, encoding="utf-8", errors="replace") as f:
            line = f.readline()
        if line.endswith("\n"):
            at = float(line.split("\t", 1)[0])
            first = at if first is None else min(first, at)
    return first
