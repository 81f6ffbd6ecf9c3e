"""What an executor task's read cost, per shard: record bytes, throttles and retries.

Tasks record them in each shard's batch end for ``reportLatestOffset``. A read's retries are the
growth of the process-wide counts over it: a worker runs one task at a time (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from ..errors import ThrottledError
from ..retry import RETRIES
from .planner import BatchEnd

T = TypeVar("T")


@dataclass(frozen=True)
class RetryTally:
    """Retries made during one read, and how many of them were throttles."""

    retries: int = 0
    throttles: int = 0

    @classmethod
    def between(cls, before: Mapping[str, int], after: Mapping[str, int]) -> RetryTally:
        """The retries counted from snapshot ``before`` to snapshot ``after`` (both by error class name)."""
        grown = {name: count - before.get(name, 0) for name, count in after.items()}
        throttled = throttle_error_names()
        return cls(
            retries=sum(n for n in grown.values() if n > 0),
            throttles=sum(n for name, n in grown.items() if n > 0 and name in throttled),
        )


NO_RETRIES = RetryTally()


def counted(read: Callable[[], T]) -> tuple[T, RetryTally]:
    """Run ``read`` and return its result with the retries this process made meanwhile."""
    before = RETRIES.snapshot()
    result = read()
    return result, RetryTally.between(before, RETRIES.snapshot())


@lru_cache(maxsize=1)
def throttle_error_names() -> frozenset[str]:
    """``ThrottledError`` and every subclass, by name (the retry counts are kept by class name)."""
    names, pending = set(), [ThrottledError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return frozenset(names)


@dataclass
class ShardTotals:
    """The driver's running sums per shard of what the recorded batch ends say the reads cost."""

    bytes_read: dict[str, int]
    throttles: dict[str, int]
    retries: dict[str, int]

    @classmethod
    def empty(cls) -> ShardTotals:
        return cls({}, {}, {})

    def add(self, shard_id: str, end: BatchEnd) -> None:
        """Count one recorded batch end of ``shard_id`` (each batch once: the driver reads a batch's ends once)."""
        for sums, value in ((self.bytes_read, end.byte_count), (self.throttles, end.throttles),
                            (self.retries, end.retries)):
            sums[shard_id] = sums.get(shard_id, 0) + value

    def report(self) -> dict[str, dict[str, int]]:
        """The ``reportLatestOffset`` maps, shards sorted: ``bytesRead``, ``throttles``, ``retries``."""
        return {
            "bytesRead": dict(sorted(self.bytes_read.items())),
            "throttles": dict(sorted(self.throttles.items())),
            "retries": dict(sorted(self.retries.items())),
        }
