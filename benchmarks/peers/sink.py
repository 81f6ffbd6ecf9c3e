"""The delivery log every peer's record processor writes: one tab-separated line per record.

Line: ``<delivered at, epoch s> <shard> <sequence> <partition key> <data head>``.
The data head is the first 48 bytes of the record as text (the keyed-counter
workload's ``key:n``; the replay endpoint's ``<shard>/<offset>/``), so the
harness can check loss, duplicates and order without keeping payloads.
Standard library only: each peer's worker imports it under its own venv.
A batch is written and flushed before the processor checkpoints it, so a
line means "processed", whatever happens to the process afterwards.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import IO

HEAD = 48


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value[:HEAD].decode("utf-8", "replace")
    return value[:HEAD].replace("\t", " ").replace("\n", " ").replace("\r", " ")


class Sink:
    """Appends delivery lines to ``<directory>/<worker>-<pid>.tsv``; ``write_batch`` flushes.

    One file per process: the KCL daemon runs a processor process per shard,
    and lines from several writers must never interleave.
    """

    def __init__(self, directory: str, worker: str) -> None:
        path = os.path.join(directory, f"{worker}-{os.getpid()}.tsv")
        self._file: IO[str] = open(path, "a", buffering=1 << 16, encoding="utf-8")

    def write_batch(self, shard: str, records: Iterable[tuple[str, str | None, bytes | str | None]]) -> None:
        """``records``: (sequence, partition key, data) in delivery order."""
        now = f"{time.time():.6f}"
        lines = [f"{now}\t{shard}\t{seq}\t{_text(key)}\t{_text(data)}\n" for seq, key, data in records]
        self._file.write("".join(lines))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def sink_from_env() -> Sink:
    """The sink named by ``PEERS_SINK`` and ``PEERS_WORKER`` (the KCL daemon passes processors no arguments)."""
    return Sink(os.environ["PEERS_SINK"], os.environ.get("PEERS_WORKER", "w"))
