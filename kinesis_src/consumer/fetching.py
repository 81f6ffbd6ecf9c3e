"""Which driver reads a held shard: async polling, or enhanced fan-out (``consumer_mode="efo"``).

Both have one contract (``run()``, ``position``; pages to ``deliver``, the last to ``on_end``), so
the consumer's lease and batch logic is the same in both modes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Union

from ..aws.async_kinesis import AsyncKinesisClient
from ..positions import Position
from ..records import RecordPage
from ..retrieval.async_fanout import FanOutFetcher
from ..retrieval.async_polling import ShardFetcher
from ..retrieval.pacing import FetchPacing
from ..retrieval.registration import FanOutTarget
from ..retrieval.subscriptions import FanOutCounts

Fetcher = Union[ShardFetcher, FanOutFetcher]

POLLING_CONNECTIONS = 64  # one GetRecords in flight per shard at a time, and requests are short
FAN_OUT_CONNECTIONS = 1024  # each subscription holds its connection for up to 5 minutes


@dataclass(frozen=True)
class FetchSettings:
    limit: int
    pacing: FetchPacing
    strict_aggregation: bool
    fan_out: FanOutTarget | None  # set: enhanced fan-out with this registered consumer

    @property
    def max_connections(self) -> int:
        return FAN_OUT_CONNECTIONS if self.fan_out is not None else POLLING_CONNECTIONS


def new_fetcher(
    kinesis: AsyncKinesisClient,
    settings: FetchSettings,
    stream: str,
    shard_id: str,
    start: Position,
    *,
    deliver: Callable[[RecordPage], Awaitable[None]],
    on_end: Callable[[RecordPage], Awaitable[None]],
    on_expired: Callable[[str, str, str], Awaitable[None]] | None,
    on_deaggregated: Callable[[int, int], None],
    fan_out_counts: FanOutCounts | None = None,
) -> Fetcher:
    if settings.fan_out is not None:
        return FanOutFetcher(
            kinesis.fan_out(), settings.fan_out.consumer_arn, stream, shard_id, start,
            deliver=deliver, on_end=on_end, on_expired=on_expired, stream_arn=settings.fan_out.stream_arn,
            strict_aggregation=settings.strict_aggregation, on_deaggregated=on_deaggregated, counts=fan_out_counts,
        )
    return ShardFetcher(
        kinesis, stream, shard_id, start, limit=settings.limit, pacing=settings.pacing,
        deliver=deliver, on_end=on_end, on_expired=on_expired,
        strict_aggregation=settings.strict_aggregation, on_deaggregated=on_deaggregated,
    )
