"""What a consumer reports about itself: a plain object to read, and a periodic log line.

With several streams, :class:`ConsumerMetrics` holds the totals and one per stream in ``streams``;
each stream writes through a :class:`StreamMetrics`, which updates both."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterator, MutableMapping


@dataclass
class ShardMetrics:
    """One held shard. ``millis_behind_latest`` is Kinesis' own lag figure from the last GetRecords."""

    shard_id: str
    millis_behind_latest: int | None = None
    records: int = 0
    bytes: int = 0
    last_sequence_number: str | None = None
    checkpoint: str | None = None
    held_past_end_s: float | None = None  # since the fetcher saw the shard's end; None until then
    stream: str = ""  # the stream of the shard (several streams may have a shard of the same id)
    key_range: str = ""  # the lease set's key range, "START-END" ("": the whole hash space)


@dataclass
class ConsumerMetrics:
    """Counters since the consumer started; ``shards`` covers the leases held now.

    Meanings: docs/consumer.md, "Metrics", and docs/metrics.md. With several streams the counters
    are totals, ``streams`` holds each stream's own, and ``shards`` is keyed
    ``"<stream>/<shard id>"`` (with one stream: the shard id)."""

    worker_id: str
    records: int = 0
    bytes: int = 0
    batches: int = 0
    checkpoints: int = 0
    leases_taken: int = 0
    leases_lost: int = 0
    leases_released: int = 0
    shards_ended: int = 0
    shard_ends_failed: int = 0
    shards_held_past_end: int = 0
    checkpoints_expired: int = 0
    aggregates: int = 0
    aggregates_malformed: int = 0
    records_filtered: int = 0
    checkpoint_write_us: int = 0
    efo_resubscribes: int = 0
    efo_event_stream_failures: dict[str, int] = field(default_factory=dict)
    shards: dict[str, ShardMetrics] = field(default_factory=dict)
    streams: dict[str, ConsumerMetrics] = field(default_factory=dict)

    def count_aggregates(self, aggregates: int, malformed: int) -> None:
        self.aggregates += aggregates
        self.aggregates_malformed += malformed

    def count_resubscribe(self) -> None:
        self.efo_resubscribes += 1

    def count_event_stream_failure(self, code: str) -> None:
        self.efo_event_stream_failures[code] = self.efo_event_stream_failures.get(code, 0) + 1

    @property
    def leases_held(self) -> int:
        return len(self.shards)

    @property
    def max_millis_behind_latest(self) -> int | None:
        lags = [s.millis_behind_latest for s in self.shards.values() if s.millis_behind_latest is not None]
        return max(lags) if lags else None

    def snapshot(self) -> ConsumerMetrics:
        """A copy the caller may keep: the live object keeps changing on the consumer's loop."""
        return replace(
            self,
            efo_event_stream_failures=dict(self.efo_event_stream_failures),
            shards={k: replace(v) for k, v in self.shards.items()},
            streams={k: v.snapshot() for k, v in self.streams.items()},
        )

    def summary(self) -> str:
        """The periodic log line: leases, deliveries, lag; with EFO trouble, its resubscribes and failures."""
        lag = self.max_millis_behind_latest
        stuck = f", {self.shards_held_past_end} held past their end" if self.shards_held_past_end else ""
        failed = f", {self.shard_ends_failed} failed to end" if self.shard_ends_failed else ""
        return (
            f"worker {self.worker_id}: {self.leases_held} lease(s) held{stuck} "
            f"(taken {self.leases_taken}, lost {self.leases_lost}, released {self.leases_released}, "
            f"ended {self.shards_ended}{failed}); {self.records} records / {self.bytes} bytes in "
            f"{self.batches} batches, {self.checkpoints} checkpoints; max lag "
            f"{'unknown' if lag is None else f'{lag} ms'}{self._fan_out_summary()}"
        )

    def _fan_out_summary(self) -> str:
        if not self.efo_resubscribes and not self.efo_event_stream_failures:
            return ""
        failures = ", ".join(f"{code} {n}" for code, n in sorted(self.efo_event_stream_failures.items()))
        return f"; {self.efo_resubscribes} EFO resubscribes (event streams failed: {failures or 'none'})"


_COUNTERS = frozenset(f.name for f in fields(ConsumerMetrics) if f.type == "int")


class StreamMetrics:
    """One stream's metrics as its part of the consumer writes them: every counter change lands in
    the stream's own :class:`ConsumerMetrics` and in the consumer's totals (gauges too: a gauge set
    on one stream moves the total by the difference)."""

    def __init__(self, total: ConsumerMetrics, stream: str, keyed_by_stream: bool) -> None:
        own = ConsumerMetrics(total.worker_id)
        total.streams[stream] = own
        object.__setattr__(self, "_total", total)
        object.__setattr__(self, "_own", own)
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "shards", _StreamShards(total.shards, own.shards, stream, keyed_by_stream))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._own, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _COUNTERS:
            raise AttributeError(f"StreamMetrics: {name} is not a counter")
        setattr(self._total, name, getattr(self._total, name) + value - getattr(self._own, name))
        setattr(self._own, name, value)

    def for_unit(self, scope: str, keyed: bool = True) -> StreamMetrics:
        """The same counters, with shards labelled by the key range ``scope`` (a unit's set).
        ``keyed`` keeps two units of one shard apart: ``"<shard id>@<scope>"`` in the maps (#11)."""
        view = object.__new__(StreamMetrics)
        for name in ("_total", "_own", "stream"):
            object.__setattr__(view, name, self.__dict__[name])
        object.__setattr__(view, "shards", self.shards.for_unit(scope, keyed))
        return view

    def count_aggregates(self, aggregates: int, malformed: int) -> None:
        self.aggregates += aggregates
        self.aggregates_malformed += malformed

    def count_resubscribe(self) -> None:
        self.efo_resubscribes += 1

    def count_event_stream_failure(self, code: str) -> None:
        """In the stream's own map and in the consumer's totals."""
        self._own.count_event_stream_failure(code)
        self._total.count_event_stream_failure(code)


class _StreamShards(MutableMapping[str, ShardMetrics]):
    """A stream's shards by shard id, written through to the consumer's map (keyed by stream too).
    A unit's view (:meth:`for_unit`) labels its shards with the unit's range and, when keyed, keeps
    them under ``"<shard id>@<range>"``."""

    def __init__(self, total: dict[str, ShardMetrics], own: dict[str, ShardMetrics], stream: str,
                 keyed_by_stream: bool, unit: str = "", keyed_by_unit: bool = False) -> None:
        self._total, self._own, self._stream, self._keyed = total, own, stream, keyed_by_stream
        self._unit, self._suffix = unit, f"@{unit}" if keyed_by_unit else ""

    def for_unit(self, unit: str, keyed: bool) -> _StreamShards:
        return _StreamShards(self._total, self._own, self._stream, self._keyed, unit, keyed)

    def _own_key(self, shard_id: str) -> str:
        return shard_id + self._suffix

    def _key(self, shard_id: str) -> str:
        return f"{self._stream}/{self._own_key(shard_id)}" if self._keyed else self._own_key(shard_id)

    def __getitem__(self, shard_id: str) -> ShardMetrics:
        return self._own[self._own_key(shard_id)]

    def __setitem__(self, shard_id: str, shard: ShardMetrics) -> None:
        shard.stream, shard.key_range = self._stream, self._unit
        self._own[self._own_key(shard_id)] = shard
        self._total[self._key(shard_id)] = shard

    def __delitem__(self, shard_id: str) -> None:
        del self._own[self._own_key(shard_id)]
        self._total.pop(self._key(shard_id), None)

    def __iter__(self) -> Iterator[str]:
        """This view's shard ids (a unit's own; the plain view: those without a unit suffix)."""
        if self._suffix:
            return iter([k[: -len(self._suffix)] for k in list(self._own) if k.endswith(self._suffix)])
        return iter([k for k in list(self._own) if "@" not in k])

    def __len__(self) -> int:
        return sum(1 for _ in self)
