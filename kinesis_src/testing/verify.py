"""Check what a user's pipeline delivered against what the keyed-counter producer put.

The rules: docs/testing.md, "The workload and the verifier".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .delivery import Delivery, OrderViolation, scan

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
MODES = (EXACTLY_ONCE, AT_LEAST_ONCE)
_MODE_ALIASES = {"exactly-once": EXACTLY_ONCE, "at-least-once": AT_LEAST_ONCE}


class DeliveryError(AssertionError):
    """The pipeline lost, duplicated or reordered records; ``report`` says which."""

    def __init__(self, report: DeliveryReport) -> None:
        super().__init__(report.summary())
        self.report = report


@dataclass
class DeliveryReport:
    """What :func:`verify_delivery` found; ``ok`` when nothing the mode forbids happened."""

    mode: str
    delivered: int
    distinct: int
    expected: int
    keys: int
    missing: list[tuple[str, int]] = field(default_factory=list)
    duplicates: dict[tuple[str, int], int] = field(default_factory=dict)  # (key, n) -> times received
    out_of_order: list[OrderViolation] = field(default_factory=list)
    unexpected: list[tuple[str, int]] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)  # repr of each item that did not decode

    @property
    def extra_deliveries(self) -> int:
        """Deliveries beyond the first of each (key, n)."""
        return sum(times - 1 for times in self.duplicates.values())

    @property
    def problems(self) -> dict[str, int]:
        """Counts of every kind of problem that fails this mode (zero counts omitted)."""
        counts = {
            "missing": len(self.missing),
            "duplicated": len(self.duplicates) if self.mode == EXACTLY_ONCE else 0,
            "out of order": len(self.out_of_order),
            "unexpected": len(self.unexpected),
            "malformed": len(self.malformed),
        }
        return {kind: count for kind, count in counts.items() if count}

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self, examples: int = 5) -> str:
        """A readable report: verdict, counts, then up to ``examples`` examples of each problem."""
        verdict = "OK" if self.ok else "FAILED: " + ", ".join(f"{n} {kind}" for kind, n in self.problems.items())
        duplicate_note = "" if self.mode == EXACTLY_ONCE else " (allowed at least once)"
        lines = [
            f"keyed-counter delivery check ({self.mode.replace('_', '-')}): {verdict}",
            f"  expected records   {self.expected} over {self.keys} keys",
            f"  items received     {self.delivered} ({self.distinct} distinct)",
            f"  missing            {len(self.missing)}",
            f"  duplicated         {len(self.duplicates)} records, {self.extra_deliveries} extra deliveries"
            + duplicate_note,
            f"  out of order       {len(self.out_of_order)}",
            f"  unexpected         {len(self.unexpected)}",
            f"  malformed          {len(self.malformed)}",
        ]
        if self.missing:
            lines.append("missing (key: counters):")
            lines += [f"  {line}" for line in _ranges_by_key(self.missing)[:examples]]
        if self.duplicates:
            lines.append("duplicated (key:counter x times received):")
            lines += [f"  {key}:{n} x{times}" for (key, n), times in sorted(self.duplicates.items())[:examples]]
        if self.out_of_order:
            lines.append("out of order (first delivery of a counter after a higher one of the same key):")
            lines += [f"  {violation.describe()}" for violation in self.out_of_order[:examples]]
        if self.unexpected:
            lines.append("unexpected (never acknowledged by Kinesis to the producer):")
            lines += [f"  {line}" for line in _ranges_by_key(self.unexpected)[:examples]]
        if self.malformed:
            lines.append("malformed (not b'<key>:<n>' data):")
            lines += [f"  {item}" for item in self.malformed[:examples]]
        return "\n".join(lines)

    def raise_for_problems(self) -> DeliveryReport:
        """Raise :class:`DeliveryError` unless ``ok``; returns the report for chaining."""
        if not self.ok:
            raise DeliveryError(self)
        return self

    def __str__(self) -> str:
        return self.summary()


def verify_delivery(
    delivered: Iterable[Any],
    expected: Any,
    mode: str = EXACTLY_ONCE,
    *,
    raise_on_failure: bool = True,
) -> DeliveryReport:
    """Compare what the sink received, in the order received, with what the producer put.

    ``delivered``: record data (``"<key>:<n>"``), Records, mappings or Spark Rows with ``data``,
    ``(key, n)`` pairs, or a ``pyarrow.Table``. ``expected``: the KeyedProducer, a mapping
    ``key -> last counter``, or a set of ``(key, n)``. ``mode``: ``"exactly_once"`` or
    ``"at_least_once"``. Raises :class:`DeliveryError` unless ``raise_on_failure=False``.
    """
    mode = _MODE_ALIASES.get(mode, mode)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return _finish(_delivery_report(scan(delivered, expected), mode), raise_on_failure)


def _delivery_report(delivery: Delivery, mode: str) -> DeliveryReport:
    return DeliveryReport(
        mode=mode,
        delivered=delivery.delivered,
        distinct=len(delivery.seen),
        expected=len(delivery.wanted),
        keys=len({key for key, _ in delivery.wanted}),
        missing=delivery.missing,
        duplicates={pair: times for pair, times in sorted(delivery.seen.items()) if times > 1},
        out_of_order=list(delivery.late_firsts),
        unexpected=delivery.unexpected,
        malformed=list(delivery.malformed),
    )


def _finish(report: DeliveryReport, raise_on_failure: bool) -> DeliveryReport:
    return report.raise_for_problems() if raise_on_failure else report


@dataclass(frozen=True)
class OrderReport:
    """:func:`check_order`'s view: ``ok`` only if every count of a problem is zero.

    ``out_of_order``: each delivery not above its key's previous one; ``duplicates``: extra
    deliveries of a ``(key, n)`` plus those of a ``(shard, sequence number)``.
    """

    records: int
    keys: int
    out_of_order: list[str]
    duplicates: int
    missing: int
    unexpected: int
    shards: Counter[str]

    @property
    def ok(self) -> bool:
        return not (self.out_of_order or self.duplicates or self.missing or self.unexpected)

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        lines = [
            f"per-key order check: {verdict}",
            f"  records read      {self.records}",
            f"  partition keys    {self.keys}",
            f"  out of order      {len(self.out_of_order)}",
            f"  duplicates        {self.duplicates}",
            f"  missing           {self.missing}",
            f"  unexpected        {self.unexpected}",
        ]
        lines += [f"    e.g. {example}" for example in self.out_of_order[:5]]
        return "\n".join(lines)


def check_order(records: Iterable[Any], expected: Any) -> OrderReport:
    """Check per-key order and completeness of keyed-counter Records, counting records per shard.

    The same scan as :func:`verify_delivery`; ``ValueError`` on an item that is not a counter.
    """

    delivery = scan(records, expected)
    if delivery.malformed:
        raise ValueError(
            f"check_order: {len(delivery.malformed)} of {delivery.delivered} items are not keyed-counter Records "
            "(data b'<key>:<n>'); pass the Records read from the producer's stream, or use verify_delivery, "
            "which lists malformed items"
        )
    return OrderReport(
        records=delivery.delivered,
        keys=delivery.keys_seen,
        out_of_order=[_step_down(violation) for violation in delivery.step_downs],
        duplicates=_extra(delivery.seen) + _extra(delivery.positions),
        missing=len(delivery.missing),
        unexpected=len(delivery.unexpected),
        shards=delivery.shards,
    )


def _step_down(violation: OrderViolation) -> str:
    return f"{violation.key}: {violation.n} (in {violation.shard}) after {violation.after} (in {violation.after_shard})"


def _extra(counts: Counter[Any]) -> int:
    return sum(times - 1 for times in counts.values() if times > 1)


def _ranges_by_key(pairs: list[tuple[str, int]]) -> list[str]:
    """``key-001: 4-9, 12 (7 records)`` per key, keys in order; pairs must be sorted."""
    by_key: dict[str, list[int]] = {}
    for key, n in pairs:
        by_key.setdefault(key, []).append(n)
    lines = []
    for key, counters in by_key.items():
        spans: list[str] = []
        start = prev = counters[0]
        for n in counters[1:] + [None]:  # type: ignore[list-item]
            if n is not None and n == prev + 1:
                prev = n
                continue
            spans.append(str(start) if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        noun = "record" if len(counters) == 1 else "records"
        lines.append(f"{key}: {', '.join(spans)} ({len(counters)} {noun})")
    return lines
