"""Where one holding of a shard may checkpoint: below the first record that is not done.

Records finish in any order, but a checkpoint is a position: it only reaches the contiguous done
prefix (ordinals in sequence order), so nothing not done is ever acknowledged. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

B = TypeVar("B")


@dataclass(frozen=True)
class Span(Generic[B]):
    """One batch's records: ordinals ``start .. start + count - 1`` (``seq`` numbers spans 0, 1, 2...)."""

    batch: B
    seq: int
    start: int
    count: int
    nbytes: int

    @property
    def end(self) -> int:
        return self.start + self.count


@dataclass(frozen=True)
class Target(Generic[B]):
    """A checkpoint position: ``rows`` rows of ``span`` (all of them: the whole batch)."""

    span: Span[B]
    rows: int

    @property
    def whole(self) -> bool:
        return self.rows == self.span.count

    @property
    def mark(self) -> tuple[int, int]:
        return (self.span.seq, self.rows)


class DoneTracker(Generic[B]):
    """The done prefix of one holding; see the module docstring."""

    def __init__(self) -> None:
        self._spans: list[Span[B]] = []
        self._seq = 0
        self.admitted = 0  # ordinals handed out
        self.low = 0  # every ordinal below is done
        self._done: set[int] = set()  # done ordinals at or above ``low``
        self.checkpointed: tuple[int, int] = (-1, 0)  # mark of the last checkpoint written

    def add(self, batch: B, count: int, nbytes: int) -> Span[B]:
        """The next batch of the holding, in delivery order; its records get the next ordinals."""
        span = Span(batch, self._seq, self.admitted, count, nbytes)
        self._seq += 1
        self.admitted += count
        self._spans.append(span)
        return span

    def complete(self, ordinal: int) -> bool:
        """Mark one record done; True if the done prefix moved."""
        if not 0 <= ordinal < self.admitted:
            raise ValueError(f"ordinal {ordinal} was never admitted (0..{self.admitted - 1})")
        if ordinal < self.low or ordinal in self._done:
            return False
        self._done.add(ordinal)
        moved = False
        while self.low in self._done:
            self._done.discard(self.low)
            self.low += 1
            moved = True
        return moved

    def is_head(self, ordinal: int) -> bool:
        """True for the first record not done: the one the checkpoint waits for."""
        return ordinal == self.low

    def target(self) -> Target[B] | None:
        """The furthest position the done prefix reaches, if past the last checkpoint:
        the latest span starting below ``low``, or an empty span exactly at ``low`` (it covers all
        before it and, for a shard's empty end batch, ends the shard)."""
        for span in reversed(self._spans):
            if span.start < self.low or (span.count == 0 and span.start <= self.low):
                found = Target(span, min(span.count, self.low - span.start))
                return found if found.mark > self.checkpointed else None
        return None

    def written(self, target: Target[B]) -> None:
        """The checkpoint at ``target`` landed; never a step back."""
        self.checkpointed = max(self.checkpointed, target.mark)

    def let_go(self) -> list[Span[B]]:
        """Drop the spans no checkpoint needs any more: wholly done, and behind the pending target
        (or, with none pending, covered by the last checkpoint). Returns them, so the caller can give
        their records and bytes back to the buffer."""
        target = self.target()
        keep_from = target.span.seq if target is not None else self._seq
        gone = [s for s in self._spans if s.seq < keep_from and s.end <= self.low]
        if gone:
            self._spans = [s for s in self._spans if not (s.seq < keep_from and s.end <= self.low)]
        return gone

    @property
    def spans(self) -> tuple[Span[B], ...]:
        return tuple(self._spans)

    @property
    def all_done(self) -> bool:
        return self.low == self.admitted
