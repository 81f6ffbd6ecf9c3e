"""What a handler says about a record besides "done": RELEASE and REJECT, raised as exceptions.

A handler that returns ACCEPTs its record. The two other outcomes of Kafka's
share groups (KIP-932) are raised, so a handler deep in a call stack can end
its record's attempt without threading a return value back up:

* :class:`Release` -- "not now": the record is delivered again later (after
  ``delay_s``); the attempt counts as a delivery.
* :class:`Reject` -- "never": the record goes to the dead letter at once.

Any other exception is a failure: retried with backoff until
``max_delivery_attempts``, then dead-lettered.

Both derive from :class:`Outcome`, a plain ``Exception`` and deliberately
*not* a :class:`~kinesis_src.errors.KinesisSourceError`: they are the
application's verdicts on its own records, not failures of the library, so
code that catches the library's errors must never swallow them (and the
library's retry loops, which read ``KinesisSourceError.retriable``, never
see them). They are ``Exception`` rather than ``BaseException`` so they
cross thread pools and ``asyncio`` tasks like any exception. A handler with a
bare ``except Exception:`` around its body catches them too: re-raise them.
"""

from __future__ import annotations


class Outcome(Exception):
    """Base of the outcomes a handler raises on purpose (:class:`Release`, :class:`Reject`)."""


class Release(Outcome):
    """RELEASE: give the record back for a later delivery (after ``delay_s`` seconds, default at once).

    It counts as a delivery: a record released at its ``max_delivery_attempts``-th
    delivery is dead-lettered, as KIP-932 archives it. In ``"key"`` and
    ``"shard"`` ordering the record keeps its place: nothing after it in its
    key (or shard) starts before it is done.
    """

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
