"""What a handler says about a record besides "done": RELEASE and REJECT, raised as exceptions.

Raised, so a handler deep in a call stack can end an attempt. :class:`Outcome` is a plain
``Exception``, deliberately not a ``KinesisSourceError``: verdicts, not failures of the library."""

from __future__ import annotations


class Outcome(Exception):
    """Base of the outcomes a handler raises on purpose (:class:`Release`, :class:`Reject`)."""


class Release(Outcome):
    """RELEASE: give the record back for a later delivery (after ``delay_s``; default at once).
    It counts as a delivery (at ``max_delivery_attempts`` it is dead-lettered, as KIP-932 does);
    in ``"key"`` and ``"shard"`` ordering the record keeps its place in its key (or shard)."""

    def __init__(self, reason: str = "released by the handler", *, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"Release(delay_s=...) must be >= 0, got {delay_s}")
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s


class Reject(Outcome):
    """REJECT: the record can never be processed; dead-letter it now, whatever its delivery count."""

    def __init__(self, reason: str = "rejected by the handler") -> None:
        super().__init__(reason)
        self.reason = reason
