"""One pass over what a sink received: the facts both keyed-counter reports are read from.

Both reports only count these facts, so they cannot disagree on what was delivered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .producer import decode


class Item(NamedTuple):
    """One delivered keyed-counter record; ``shard``/``sequence`` are None when the item does not say."""

    key: str
    n: int
    shard: str | None
    sequence: str | None


@dataclass(frozen=True)
class OrderViolation:
    """``key``'s counter ``n`` was delivered after the counter ``after`` of the same key."""

    key: str
    n: int
    after: int
    index: int  # position of the late delivery in what the sink received (0-based)
    shard: str | None = None
    after_shard: str | None = None

    def describe(self) -> str:
        where = f" (in {self.shard})" if self.shard else ""
        where_after = f" (in {self.after_shard})" if self.after_shard else ""
        return f"{self.key}: {self.n}{where} delivered after {self.after}{where_after}, at item {self.index}"


@dataclass(frozen=True)
class Delivery:
    """What :func:`scan` saw, in delivery order.

    ``late_firsts``: first deliveries below their key's highest counter so far; ``step_downs``:
    every delivery, replays included, not above its key's previous one.
    """


    delivered: int
    wanted: frozenset[tuple[str, int]]
    seen: Counter[tuple[str, int]] = field(default_factory=Counter)
    positions: Counter[tuple[str | None, str]] = field(default_factory=Counter)
    shards: Counter[str] = field(default_factory=Counter)
    keys_seen: int = 0
    late_firsts: tuple[OrderViolation, ...] = ()
    step_downs: tuple[OrderViolation, ...] = ()
    malformed: tuple[str, ...] = ()  # repr of each item that did not parse

    @property
    def missing(self) -> list[tuple[str, int]]:
        return sorted(self.wanted - self.seen.keys())

    @property
    def unexpected(self) -> list[tuple[str, int]]:
        return sorted(self.seen.keys() - self.wanted)


def scan(delivered: Iterable[Any], expected: Any) -> Delivery:
    """Parse and tally ``delivered`` (in delivery order) against ``expected``; see :func:`verify_delivery`."""
    wanted = expected_pairs(expected)
    if hasattr(delivered, "to_pylist") and hasattr(delivered, "schema"):  # a pyarrow Table or RecordBatch
        delivered = delivered.to_pylist()
    seen: Counter[tuple[str, int]] = Counter()
    positions: Counter[tuple[str | None, str]] = Counter()
    shards: Counter[str] = Counter()
    highest: dict[str, tuple[int, str | None]] = {}  # key -> highest counter delivered so far, and its shard
    last: dict[str, tuple[int, str | None]] = {}  # key -> counter of its latest delivery, and its shard
    late: list[OrderViolation] = []
    steps: list[OrderViolation] = []
    malformed: list[str] = []
    count = 0
    for index, raw in enumerate(delivered):
        count += 1
        item = parse(raw)
        if item is None:
            malformed.append(short_repr(raw))
            continue
        pair = (item.key, item.n)
        seen[pair] += 1
        if item.sequence is not None:
            positions[(item.shard, item.sequence)] += 1
        if item.shard is not None:
            shards[item.shard] += 1
        previous = last.get(item.key)
        if previous is not None and item.n <= previous[0]:
            steps.append(OrderViolation(item.key, item.n, previous[0], index, item.shard, previous[1]))
        last[item.key] = (item.n, item.shard)
        if seen[pair] > 1:
            continue  # a redelivery: a duplicate, never a late first delivery
        top = highest.get(item.key)
        if top is not None and item.n < top[0]:
            late.append(OrderViolation(item.key, item.n, top[0], index, item.shard, top[1]))
        if top is None or item.n > top[0]:
            highest[item.key] = (item.n, item.shard)
    return Delivery(count, frozenset(wanted), seen, positions, shards, len(last), tuple(late), tuple(steps),
                    tuple(malformed))


def expected_pairs(expected: Any) -> set[tuple[str, int]]:
    """Every ``(key, n)`` from a KeyedProducer, a mapping ``key -> last counter`` or a set of pairs."""
    if hasattr(expected, "expected") and callable(expected.expected):  # a KeyedProducer
        return set(expected.expected())
    if isinstance(expected, Mapping):
        return {(str(key), n) for key, last in expected.items() for n in range(1, int(last) + 1)}
    if isinstance(expected, (set, frozenset, list, tuple)):
        return {(str(key), int(n)) for key, n in expected}
    raise TypeError(
        "expected must be a KeyedProducer, a mapping key -> last counter, or a set of (key, n); "
        f"got {type(expected).__name__}"
    )


def parse(item: Any) -> Item | None:
    """The keyed-counter record ``item`` holds, or None when it is not keyed-counter data."""
    shard = sequence = None
    data = item
    if isinstance(item, Mapping):
        if "data" not in item:
            return None
        data, shard = item["data"], item.get("shardId", item.get("shard_id"))
        sequence = item.get("sequenceNumber", item.get("sequence_number"))
    elif not isinstance(item, (bytes, bytearray, memoryview, str, tuple, list)) and hasattr(item, "data"):
        data = item.data  # a Record
        shard = getattr(item, "shard_id", None)
        sequence = getattr(item, "sequence_number", None)
    elif isinstance(item, tuple) and hasattr(item, "asDict"):  # a Spark Row
        row = item.asDict()
        if "data" in row:
            data, shard, sequence = row["data"], row.get("shardId"), row.get("sequenceNumber")
    pair = _pair(data)
    if pair is None:
        return None
    return Item(pair[0], pair[1], _text(shard), _text(sequence))


def _pair(data: Any) -> tuple[str, int] | None:
    if isinstance(data, (tuple, list)):
        if len(data) == 2 and isinstance(data[0], str) and isinstance(data[1], int) and not isinstance(data[1], bool):
            return data[0], data[1]
        return None
    if isinstance(data, str):
        data = data.encode()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return None
    try:
        return decode(bytes(data))
    except (UnicodeDecodeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def short_repr(item: Any, limit: int = 80) -> str:
    text = repr(item)
    return text if len(text) <= limit else text[: limit - 3] + "..."
