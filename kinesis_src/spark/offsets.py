"""Streaming offsets: each one is the *plan* of one micro-batch, replayed to its recorded ends.

Spark compares offsets as JSON text, so :meth:`Plan.to_offset` keeps one key order; new keys go
last and are read with ``.get`` (docs/spark.md, "How a micro-batch is planned and replayed").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import ConfigurationError
from ..identity import StreamIdentity
from ..positions import Position

OFFSET_VERSION = 1
REFERENCE_VERSION = 2  # the plan is stored in the lease table; the offset names it (see .plan_store)
STREAMS_VERSION = 3  # several streams: each one's offset (version 1 or 2) under its name


@dataclass(frozen=True)
class ShardPlan:
    start: Position
    max_records: int


@dataclass(frozen=True)
class Plan:
    run: str
    batch: int
    shards: Mapping[str, ShardPlan] = field(default_factory=dict)
    drained: frozenset[str] = frozenset()
    finished: frozenset[str] = frozenset()  # reached the AvailableNow cut; not read again in this run
    cut: str | None = None  # AvailableNow: ISO-8601 arrival-time cut
    pending: frozenset[str] = frozenset()  # not read (read limit) but known to have data: no probe needed
    stream: StreamIdentity | None = None  # the run's stream; None in an offset without the key

    @property
    def read(self) -> list[str]:
        """Shards this batch reads; the others are carried with their positions unchanged."""
        return sorted(sid for sid, sp in self.shards.items() if sp.max_records > 0)

    def to_offset(self) -> dict[str, Any]:
        return {
            "version": OFFSET_VERSION,
            "run": self.run,
            "batch": self.batch,
            "shards": {
                sid: {"start": self.shards[sid].start.to_dict(), "max": self.shards[sid].max_records}
                for sid in sorted(self.shards)
            },
            "drained": sorted(self.drained),
            "finished": sorted(self.finished),
            "cut": self.cut,
            "pending": sorted(self.pending),  # last: offsets without it keep their prefix
            "stream": self.stream.to_dict() if self.stream is not None else None,  # last, for the same reason
        }

    def reference(self, digest: str, shard_count: int) -> dict[str, Any]:
        """The offset of a plan stored elsewhere: run, batch, the digest of its JSON text, the identity."""
        return {
            "version": REFERENCE_VERSION,
            "run": self.run,
            "batch": self.batch,
            "plan": digest,
            "shards": shard_count,  # informative: how many shards the stored plan holds
            "stream": self.stream.to_dict() if self.stream is not None else None,
        }

    @staticmethod
    def digest_in(offset: Mapping[str, Any]) -> str | None:
        """The stored plan an offset names, or None for an offset that is the plan itself."""
        return str(offset["plan"]) if offset.get("version") == REFERENCE_VERSION and "plan" in offset else None

    @staticmethod
    def batch_in(offset: Mapping[str, Any]) -> tuple[str, int]:
        """(run, batch) of either kind of offset, without reading a stored plan."""
        try:
            return str(offset["run"]), int(offset["batch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"checkpoint offset is not a kinesis-src offset: {dict(offset)!r:.300}") from exc

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> Plan:
        try:
            version = offset["version"]
            if version != OFFSET_VERSION:
                raise ConfigurationError(
                    f"checkpoint offset has version {version!r}; this kinesis-src reads versions "
                    f"{OFFSET_VERSION} and {REFERENCE_VERSION}. Use the kinesis-src version that wrote the "
                    "checkpoint, or a new checkpoint."
                )
            return cls(
                run=str(offset["run"]),
                batch=int(offset["batch"]),
                shards={
                    sid: ShardPlan(Position.from_dict(s["start"]), int(s["max"]))
                    for sid, s in offset["shards"].items()
                },
                drained=frozenset(offset["drained"]),
                finished=frozenset(offset.get("finished", ())),
                cut=offset.get("cut"),
                pending=frozenset(offset.get("pending", ())),
                stream=StreamIdentity.from_dict(offset["stream"]) if offset.get("stream") else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, ConfigurationError):
                raise
            raise ConfigurationError(
                f"checkpoint offset is not a kinesis-src offset ({type(exc).__name__}: {exc}): {dict(offset)!r:.300}"
            ) from exc


def join_offsets(per_stream: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The query's offset: one stream's offset as it is, or every stream's under its name (sorted)."""
    if len(per_stream) == 1:
        return dict(next(iter(per_stream.values())))
    return {"version": STREAMS_VERSION, "streams": {name: dict(per_stream[name]) for name in sorted(per_stream)}}


def split_offset(offset: Mapping[str, Any], streams: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each stream's offset in the query's offset, by stream name (the inverse of :func:`join_offsets`).

    A one-stream offset belongs to the stream its identity names, else to the first of ``streams``.
    """
    if offset.get("version") == STREAMS_VERSION:
        inner = offset.get("streams")
        if not isinstance(inner, Mapping) or not all(isinstance(v, Mapping) for v in inner.values()):
            raise ConfigurationError(f"checkpoint offset is not a kinesis-src offset: {dict(offset)!r:.300}")
        return {str(name): dict(value) for name, value in inner.items()}
    identity = offset.get("stream")
    if identity:
        try:
            return {StreamIdentity.from_dict(identity).name: dict(offset)}
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"checkpoint offset has a malformed stream identity: {identity!r:.300}") from exc
    return {streams[0]: dict(offset)}
