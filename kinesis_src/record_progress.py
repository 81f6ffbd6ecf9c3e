"""A count of records read, on stderr, for long reads (``read_table``, the CLI).

rich's live display with the ``rich`` extra, else a plain line (docs/cli.md, "The rich extra").
"""


from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

RICH_EXTRA = "pip install 'kinesis-src[rich]'"
PLAIN_EVERY_S = 5.0  # a line per few seconds: readable in a terminal, a few lines a minute in a log


class RecordProgress:
    """``add`` records, ``note`` what is done (e.g. shards); thread-safe. This base shows nothing."""

    def add(self, records: int) -> None:
        """Count ``records`` more."""

    def note(self, text: str) -> None:
        """Show ``text`` next to the count from now on."""


class _RichBar(RecordProgress):
    """rich's live display: a spinner, the count, the time taken and the note."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task
        self._lock = threading.Lock()

    def add(self, records: int) -> None:
        with self._lock:
            self._progress.advance(self._task, records)

    def note(self, text: str) -> None:
        with self._lock:
            self._progress.update(self._task, note=text)


class _PlainLines(RecordProgress):
    """Without rich: one line of the count, the time taken and the note, at most every ``every_s`` seconds."""

    def __init__(self, what: str, out: TextIO, clock: Callable[[], float], every_s: float) -> None:
        self._what = what
        self._out = out
        self._clock = clock
        self._every_s = every_s
        self._started = self._last = clock()
        self._records = 0
        self._note = ""
        self._lock = threading.Lock()

    def add(self, records: int) -> None:
        with self._lock:
            self._records += records
            self._print_if_due()

    def note(self, text: str) -> None:
        with self._lock:
            self._note = text
            self._print_if_due()

    def finish(self) -> None:
        """The last line, whatever the time since the one before: what the read came to."""
        with self._lock:
            self._print(self._clock())

    def _print_if_due(self) -> None:
        now = self._clock()
        if now - self._last >= self._every_s:
            self._print(now)

    def _print(self, now: float) -> None:
        self._last = now
        taken = timedelta(seconds=int(max(0.0, now - self._started)))
        note = f", {self._note}" if self._note else ""
        print(f"{self._what}: {self._records:,} rec, {taken}{note}", file=self._out, flush=True)


@contextmanager
def record_progress(
    what: str,
    enabled: bool | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    every_s: float = PLAIN_EVERY_S,
) -> Iterator[RecordProgress]:
    """Progress of the read named ``what`` on stderr; ``clock`` and ``every_s`` pace the plain lines."""
    if not (sys.stderr.isatty() if enabled is None else enabled):
        yield RecordProgress()
        return
    progress = _rich_progress(sys.stderr)
    if progress is not None:
        with progress:
            yield _RichBar(progress, progress.add_task(what, total=None, note=""))
        return
    plain = _PlainLines(what, sys.stderr, clock, every_s)
    try:
        yield plain
    finally:
        plain.finish()


def _rich_progress(out: TextIO) -> Progress | None:
    """rich's display writing to ``out``, or None when the ``rich`` extra is not installed."""
    try:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    except ImportError:
        return None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,.0f} rec"),
               TimeElapsedColumn(), TextColumn("{task.fields[note]}"))
    return Progress(*columns, console=Console(file=out))
