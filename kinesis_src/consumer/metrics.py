"""What a consumer reports about itself: a plain object to read, and a periodic log line."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


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


@dataclass
class ConsumerMetrics:
    """Counters since the consumer started; ``shards`` covers the leases held now.

    ``records``/``bytes`` count records delivered to the application
    (redeliveries included); ``checkpoints`` counts successful checkpoint
    writes. ``leases_taken`` counts acquisitions (including re-acquiring a
    shard), ``leases_lost`` involuntary losses (taken over, coordinator
    failure), ``leases_released`` graceful hand-offs and ``shards_ended``
    shards read and acknowledged to SHARD_END. ``shard_ends_failed`` counts
    SHARD_END writes that failed (lease lost, or DynamoDB retries ran out):
    each dropped its shard, whose next owner reads the tail again and ends
    it. ``shards_held_past_end`` is the number of shards, now, whose end was
    seen longer ago than ``end_ack_warning_s`` while the batch that ends them
    is still not checkpointed: their children wait for that checkpoint.
    ``checkpoints_expired`` counts holdings that started after a checkpointed
    record that retention had already removed: records between it and the
    oldest one left, if there were any, expired unread. ``aggregates`` counts
    KPL aggregated records expanded into user records (``records`` counts
    user records), ``aggregates_malformed`` those that failed their MD5 or
    did not parse and were delivered whole (``strict_aggregation=False``).
    """

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
    shards: dict[str, ShardMetrics] = field(default_factory=dict)

    def count_aggregates(self, aggregates: int, malformed: int) -> None:
        self.aggregates += aggregates
        self.aggregates_malformed += malformed

    @property
    def leases_held(self) -> int:
        return len(self.shards)

    @property
    def max_millis_behind_latest(self) -> int | None:
        lags = [s.millis_behind_latest for s in self.shards.values() if s.millis_behind_latest is not None]
        return max(lags) if lags else None

    def snapshot(self) -> ConsumerMetrics:
        """A copy the caller may keep: the live object keeps changing on the consumer's loop."""
        return replace(self, shards={k: replace(v) for k, v in self.shards.items()})

    def summary(self) -> str:
        lag = self.max_millis_behind_latest
        stuck = f", {self.shards_held_past_end} held past their end" if self.shards_held_past_end else ""
        failed = f", {self.shard_ends_failed} failed to end" if self.shard_ends_failed else ""
        return (
            f"worker {self.worker_id}: {self.leases_held} lease(s) held{stuck} "
            f"(taken {self.leases_taken}, lost {self.leases_lost}, released {self.leases_released}, "
            f"ended {self.shards_ended}{failed}); {self.records} records / {self.bytes} bytes in "
            f"{self.batches} batches, {self.checkpoints} checkpoints; max lag "
            f"{'unknown' if lag is None else f'{lag} ms'}"
        )
