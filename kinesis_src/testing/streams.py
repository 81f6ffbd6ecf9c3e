"""Uniquely named test streams, deleted at teardown, and resharding helpers that wait for ACTIVE.

Each reshard polls with a deadline (never a bare sleep) and returns the shards it created.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..aws import KinesisClient
from ..errors import KinesisSourceError, ResourceNotFoundError
from .clients import create_stream, delete_stream

log = logging.getLogger(__name__)

MAX_HASH_KEY = 2**128 - 1
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_counter = itertools.count()


class ReshardError(KinesisSourceError):
    """A resharding request that cannot be done on the stream as it is (names the shards it saw)."""


@dataclass(frozen=True)
class Shard:
    """An open shard's id and inclusive hash-key range."""

    shard_id: str
    start: int
    end: int
    parent: str | None = None
    adjacent_parent: str | None = None

    @property
    def width(self) -> int:
        return self.end - self.start + 1

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> Shard:
        hash_range = raw["HashKeyRange"]
        return cls(
            shard_id=raw["ShardId"],
            start=int(hash_range["StartingHashKey"]),
            end=int(hash_range["EndingHashKey"]),
            parent=raw.get("ParentShardId"),
            adjacent_parent=raw.get("AdjacentParentShardId"),
        )


@dataclass(frozen=True)
class ReshardStep:
    """One split or merge done: which shards closed and which opened (``at``: a split's hash key)."""

    kind: str  # "split" | "merge" | "update_shard_count"
    parents: tuple[str, ...]
    children: tuple[str, ...]
    at: int | None = None

    def __str__(self) -> str:
        at = f" at {self.at}" if self.at is not None else ""
        return f"{self.kind} {'+'.join(self.parents)}{at} -> {', '.join(self.children)}"


def unique_stream_name(hint: str = "stream", prefix: str = "kst") -> str:
    """``<prefix>-<hint>-<n>-<random>``, at most 128 characters of the ones Kinesis allows."""
    hint = _UNSAFE.sub("-", hint).strip("-.") or "stream"
    suffix = f"{next(_counter)}-{uuid.uuid4().hex[:8]}"
    return f"{prefix}-{hint[: 128 - len(prefix) - len(suffix) - 2]}-{suffix}"


@dataclass
class StreamFactory:
    """Creates uniquely named streams and deletes every one it created at :meth:`cleanup`."""

    kinesis: KinesisClient
    hint: str = "stream"
    prefix: str = "kst"
    timeout_s: float = 60.0
    created: list[str] = field(default_factory=list)

    def __call__(self, shards: int = 1, name: str | None = None) -> str:
        return self.create(shards, name)

    def create(self, shards: int = 1, name: str | None = None) -> str:
        """Create a stream of ``shards`` shards (retry-safe), wait for ACTIVE; returns its name."""
        if shards < 1:
            raise ValueError(f"shards must be >= 1, got {shards}")
        name = name or unique_stream_name(self.hint, self.prefix)
        create_stream(self.kinesis, name, shards)
        self.created.append(name)
        self.kinesis.wait_active(name, timeout_s=self.timeout_s)
        return name

    def cleanup(self) -> None:
        """Delete every stream this factory created; one that is already gone is fine."""
        failures = []
        for name in reversed(self.created):
            try:
                delete_stream(self.kinesis, name)
            except ResourceNotFoundError:
                pass
            except KinesisSourceError as exc:  # the next test gets a fresh name anyway
                failures.append(f"{name}: {exc}")
        self.created.clear()
        for failure in failures:
            log.warning("could not delete test stream %s", failure)


@dataclass
class Resharder:
    """Split, merge, scale and randomly reshard a stream; every method waits for ACTIVE (``timeout_s``)."""

    kinesis: KinesisClient
    timeout_s: float = 60.0
    history: list[ReshardStep] = field(default_factory=list)

    # -- reading the layout ------------------------------------------------------

    def wait_active(self, stream: str) -> None:
        self.kinesis.wait_active(stream, timeout_s=self.timeout_s)

    def all_shards(self, stream: str) -> list[dict[str, Any]]:
        return self.kinesis.list_shards(stream)

    def open_shards(self, stream: str) -> list[Shard]:
        """Open shards, ordered by starting hash key."""
        shards = [
            Shard.from_api(raw) for raw in self.kinesis.list_shards(stream)
            if "EndingSequenceNumber" not in raw.get("SequenceNumberRange", {})
        ]
        return sorted(shards, key=lambda shard: shard.start)

    def _shard(self, stream: str, shard_id: str) -> Shard:
        shards = {shard.shard_id: shard for shard in self.open_shards(stream)}
        if shard_id not in shards:
            raise ReshardError(f"shard {shard_id} is not an open shard of stream {stream!r} (open: {sorted(shards)})")
        return shards[shard_id]

    # -- changing it ---------------------------------------------------------------

    def split(self, stream: str, shard_id: str | None = None, at: int | None = None) -> ReshardStep:
        """Split ``shard_id`` (default: the widest) so that hash key ``at`` starts the upper child.

        ``at`` defaults to the middle. Returns the step, children lower first.
        """
        shard = self._shard(stream, shard_id) if shard_id else max(self.open_shards(stream), key=lambda s: s.width)
        if shard.width < 2:
            raise ReshardError(f"shard {shard.shard_id} of stream {stream!r} covers one hash key: it cannot split")
        at = shard.start + shard.width // 2 if at is None else int(at)
        if not shard.start < at <= shard.end:
            raise ReshardError(
                f"cannot split {shard.shard_id} of stream {stream!r} at {at}: the hash key must be in "
                f"({shard.start}, {shard.end}]"
            )
        self.kinesis.split_shard(stream, shard.shard_id, at)
        self.wait_active(stream)
        children = sorted(
            (s for s in self.open_shards(stream) if s.parent == shard.shard_id and s.adjacent_parent is None),
            key=lambda s: s.start,
        )
        return self._done(ReshardStep("split", (shard.shard_id,), tuple(c.shard_id for c in children), at))

    def merge(self, stream: str, shard_id: str, adjacent_shard_id: str) -> ReshardStep:
        """Merge two open shards whose hash-key ranges touch; returns the step with the one child."""
        a, b = self._shard(stream, shard_id), self._shard(stream, adjacent_shard_id)
        lower, upper = (a, b) if a.start < b.start else (b, a)
        if lower.end + 1 != upper.start:
            raise ReshardError(
                f"cannot merge {shard_id} and {adjacent_shard_id} of stream {stream!r}: their hash-key "
                f"ranges [{lower.start}, {lower.end}] and [{upper.start}, {upper.end}] are not adjacent"
            )
        self.kinesis.merge_shards(stream, lower.shard_id, upper.shard_id)
        self.wait_active(stream)
        parents = {lower.shard_id, upper.shard_id}
        children = [s for s in self.open_shards(stream) if {s.parent, s.adjacent_parent} == parents]
        return self._done(ReshardStep("merge", (lower.shard_id, upper.shard_id), tuple(c.shard_id for c in children)))

    def merge_neighbours(self, stream: str, index: int = 0) -> ReshardStep:
        """Merge the ``index``-th open shard (by hash key) with the next one."""
        shards = self.open_shards(stream)
        if not 0 <= index < len(shards) - 1:
            raise ReshardError(
                f"stream {stream!r} has {len(shards)} open shard(s): no neighbour pair at index {index}"
            )
        return self.merge(stream, shards[index].shard_id, shards[index + 1].shard_id)

    def scale_to(self, stream: str, count: int, *, method: str = "split_merge") -> list[ReshardStep]:
        """Reach ``count`` open shards.

        ``"split_merge"`` (default, any emulator): split the widest or merge the narrowest pair,
        a step at a time; ``"update_shard_count"``: one UpdateShardCount (double/half at most).
        """
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if method == "update_shard_count":
            before = {s.shard_id for s in self.open_shards(stream)}
            if len(before) == count:
                return []
            self.kinesis.update_shard_count(stream, count)
            self.wait_active(stream)
            after = {s.shard_id for s in self.open_shards(stream)}
            return [self._done(ReshardStep("update_shard_count", tuple(sorted(before - after)),
                                           tuple(sorted(after - before))))]
        if method != "split_merge":
            raise ValueError(f"method must be 'split_merge' or 'update_shard_count', got {method!r}")
        steps = []
        while True:
            shards = self.open_shards(stream)
            if len(shards) == count:
                return steps
            if len(shards) < count:
                steps.append(self.split(stream, max(shards, key=lambda s: s.width).shard_id))
            else:
                pair = min(range(len(shards) - 1), key=lambda i: shards[i].width + shards[i + 1].width)
                steps.append(self.merge(stream, shards[pair].shard_id, shards[pair + 1].shard_id))

    def random_reshards(
        self,
        stream: str,
        seed: int,
        steps: int,
        *,
        min_shards: int = 1,
        max_shards: int = 8,
        between: Callable[[ReshardStep], None] | None = None,
    ) -> list[ReshardStep]:
        """``steps`` random splits and merges by ``random.Random(seed)``, within the shard bounds.

        The same seed on the same layout repeats them; ``between(step)`` runs after each. Returns
        the steps: print them to reproduce a failure.
        """

        if not 1 <= min_shards <= max_shards:
            raise ValueError(f"need 1 <= min_shards <= max_shards, got {min_shards}, {max_shards}")
        rng = random.Random(seed)
        done = []
        for _ in range(steps):
            shards = self.open_shards(stream)
            can_split = len(shards) < max_shards and any(s.width >= 10 for s in shards)
            can_merge = len(shards) > min_shards and len(shards) >= 2
            if not (can_split or can_merge):
                raise ReshardError(f"stream {stream!r} has {len(shards)} shard(s): no split or merge fits "
                                   f"between {min_shards} and {max_shards}")
            if can_split and (not can_merge or rng.random() < 0.5):
                shard = rng.choice([s for s in shards if s.width >= 10])
                margin = shard.width // 10
                step = self.split(stream, shard.shard_id, rng.randint(shard.start + margin + 1, shard.end - margin))
            else:
                index = rng.randrange(len(shards) - 1)
                step = self.merge(stream, shards[index].shard_id, shards[index + 1].shard_id)
            done.append(step)
            if between is not None:
                between(step)
        return done

    def _done(self, step: ReshardStep) -> ReshardStep:
        log.info("resharded: %s", step)
        self.history.append(step)
        return step
