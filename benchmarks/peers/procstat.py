"""CPU seconds and resident memory of a worker's whole process tree, read from /proc.

A worker is a process group leader (started with ``start_new_session``);
the KCL daemon's shard processes and kcl-rs' threads all count. CPU is
user + system time of every live process in the tree plus what its reaped
children used (``cutime``/``cstime``); memory is the sum of RSS over the
tree, sampled by :class:`Sampler` and reported at its peak.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from 3 (state) on


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None:
                tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants that are alive now."""
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, []))
    return out


@dataclass(frozen=True)
class Usage:
    """CPU seconds used so far and resident bytes now, for one process tree."""

    cpu_s: float
    rss_bytes: int


def usage(root: int) -> Usage:
    cpu = rss = 0
    for pid in tree_pids(root):
        fields = _stat(pid)
        if fields is None:
            continue
        cpu += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        rss += int(fields[21]) * PAGE
    return Usage(cpu / TICKS, rss)


class Sampler:
    """Samples a tree's usage every ``interval_s`` on a thread; keeps the peak RSS and the last CPU."""

    def __init__(self, root: int, interval_s: float = 0.25) -> None:
        self.root, self.interval_s = root, interval_s
        self.peak_rss = 0
        self.last = Usage(0.0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> Usage:
        now = usage(self.root)
        if now.rss_bytes:
            self.last = now
            self.peak_rss = max(self.peak_rss, now.rss_bytes)
        return self.last

    def stop(self) -> Usage:
        self._stop.set()
        self._thread.join()
        return self.sample()
