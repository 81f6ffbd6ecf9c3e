"""Another git revision of this repository beside the working tree: the '(before)' side of a benchmark.

A benchmark that runs the old revision's own scripts (readers, workers) as
subprocesses of the same run measures before and after on the same
emulators under the same load, which a shared machine can not promise
across two runs. These helpers export the revision, order each round's
pair, and summarise paired rounds as after/before ratios.
"""

from __future__ import annotations

import atexit
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def export(root: Path, rev: str) -> Path:
    """The repository at ``root`` as of ``rev``, in a temporary directory removed at exit."""
    target = tempfile.mkdtemp(prefix="bench-before-")
    atexit.register(shutil.rmtree, target, True)
    archive = subprocess.run(["git", "-C", str(root), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return Path(target)


def in_turn(round_index: int, pair: Sequence[T]) -> list[T]:
    """``pair`` in the given order in even rounds and reversed in odd ones, so neither side always runs
    second (on a warmer cache, a busier lease table, a later moment of the neighbours' load)."""
    return list(pair) if round_index % 2 == 0 else list(reversed(pair))


def ratio_text(after: Sequence[float | None], before: Sequence[float | None], fmt: str = ".2f") -> str:
    """``median after / median before = ratio``, then each round's own ratio (round i of one side against
    round i of the other) in round order, which shows how much of the ratio is noise. None is a failed
    round: left out of the medians, and its round's ratio shows as '-'."""
    good_after, good_before = [x for x in after if x is not None], [x for x in before if x is not None]
    if not good_after or not good_before:
        return "n/a (a side has no successful round)"
    a, b = statistics.median(good_after), statistics.median(good_before)
    rounds = "/".join("-" if x is None or not y else f"{x / y:.2f}" for x, y in zip(after, before))
    return f"{a:{fmt}} / {b:{fmt}} = {a / b:.2f}x (rounds {rounds})"
