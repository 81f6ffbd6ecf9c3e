"""A count of records read, on stderr, for long reads (``read_table``, the CLI): rich's progress display.

Shown when asked (``enabled=True``), or when ``enabled`` is None and stderr
is a terminal. Off a terminal rich draws nothing while running and prints
the final line when the read ends, so a log gets one line, not a bar's
every frame.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RecordProgress:
    """``add`` records, ``note`` what is done (e.g. shards); thread-safe, a no-op when disabled."""

    def __init__(self, progress=None, task=None) -> None:  # rich.progress.Progress, its TaskID
        self._progress = progress
        self._task = task
        self._lock = threading.Lock()

    def add(self, records: int) -> None:
        if self._progress is not None:
            with self._lock:
                self._progress.advance(self._task, records)

    def note(self, text: str) -> None:
        if self._progress is not None:
            with self._lock:
                self._progress.update(self._task, note=text)


@contextmanager
def record_progress(what: str, enabled: bool | None = None) -> Iterator[RecordProgress]:
    if not (sys.stderr.isatty() if enabled is None else enabled):
        yield RecordProgress()
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,.0f} rec"),
               TimeElapsedColumn(), TextColumn("{task.fields[note]}"))
    with Progress(*columns, console=console) as progress:
        yield RecordProgress(progress, progress.add_task(what, total=None, note=""))
