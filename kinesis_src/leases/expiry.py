"""The one judge of "has this heartbeat stopped": worker heartbeats, the query and key-range claims.

A value expires once unchanged for ``failover_s`` since this observer first saw it, on its own
clock (the KCL's rule): wall clocks are never compared. Pure: no I/O, the clock injected."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, Iterable, Mapping, TypeVar

from ..errors import ConfigurationError

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Observation:
    """What one look at a heartbeat says. ``changed``: the value differs from the one seen before
    (or is seen for the first time), so its owner was alive recently. ``expires_at``: the
    observer's clock reading at which the value expires if still unchanged."""

    changed: bool
    unchanged_s: float
    expires_at: float
    expired: bool


@dataclass(frozen=True)
class Watch(Generic[K]):
    """One look while watching heartbeats until one moves or all of them expire. ``moved``: keys
    whose value changed or that came back (their owners are alive); ``expired``: every key left is
    unchanged for failover_s (vacuously when none is); ``wait_s``: from now to the first expiry."""

    moved: tuple[K, ...]
    expired: bool
    wait_s: float


@dataclass(frozen=True)
class _Sighting:
    value: Hashable
    first_seen: float


class ExpiryJudge:
    """Remembers, per key (a worker id, a claim), when its current value was first seen."""

    def __init__(self, failover_s: float, clock: Callable[[], float]) -> None:
        if failover_s <= 0:
            raise ConfigurationError(f"failover_s must be > 0, got {failover_s}")
        self.failover_s = failover_s
        self.clock = clock
        self._seen: dict[Hashable, _Sighting] = {}

    def observe(self, key: Hashable, value: Hashable) -> Observation:
        """Record that ``key`` holds ``value`` now; expired if it held it for failover_s already."""
        now = self.clock()
        sighting = self._seen.get(key)
        changed = sighting is None or sighting.value != value
        if sighting is None or changed:
            sighting = self._seen[key] = _Sighting(value, now)
        unchanged = now - sighting.first_seen
        expires_at = sighting.first_seen + self.failover_s
        return Observation(changed, unchanged, expires_at, now >= expires_at)

    def forget(self, key: Hashable) -> None:
        """Drop a key (declared dead, or gone): its next value is seen afresh."""
        self._seen.pop(key, None)

    def retain(self, keys: Iterable[Hashable]) -> None:
        """Forget every key not in ``keys`` (the heartbeats the last scan returned)."""
        keep = set(keys)
        for key in [k for k in self._seen if k not in keep]:
            del self._seen[key]

    def observe_all(self, values: Mapping[K, Hashable]) -> dict[K, Observation]:
        """One scan: every key listed observed with its value, every key not listed forgotten."""
        self.retain(values)
        return {key: self.observe(key, value) for key, value in values.items()}

    def watch(self, values: Mapping[K, Hashable]) -> Watch[K]:
        """One look of a watch (a scan, :meth:`observe_all`); the first look, the one found, seeds it."""
        seen = self.observe_all(values)
        moved = tuple(key for key, o in seen.items() if o.changed)
        return Watch(moved, all(o.expired for o in seen.values()), max(0.0, self.next_expiry() - self.clock()))

    def next_expiry(self) -> float:
        """The earliest clock reading at which a watched value would expire (inf: none watched)."""
        return min((s.first_seen + self.failover_s for s in self._seen.values()), default=math.inf)
