"""What the driver sends to a Spark task: picklable values, no clients, locks or credentials."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from lineage import KeyRange

from ..config import AwsSettings, CredentialSource
from ..positions import Position, parse_timestamp
from ..retrieval.registration import FanOutTarget
from ..stream_ref import StreamRef


@dataclass(frozen=True)
class Endpoint:
    region: str
    endpoint_url: str | None
    dynamodb_endpoint_url: str | None
    credentials: CredentialSource = field(default_factory=CredentialSource)  # names only: each task assumes the role

    def settings(self) -> AwsSettings:
        return AwsSettings(self.region, self.endpoint_url, self.dynamodb_endpoint_url, credentials=self.credentials)


@dataclass(frozen=True)
class ShardSlice:
    """One shard's share of a partition."""

    shard_id: str
    start: dict[str, str]  # Position.to_dict()
    max_records: int | None = None
    end_sequence: str | None = None  # inclusive; set when replaying a recorded end

    @property
    def start_position(self) -> Position:
        return Position.from_dict(self.start)


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    index: int
    stream: str
    endpoint: Endpoint
    slices: tuple[ShardSlice, ...]
    max_records_per_fetch: int = 10_000
    fetch_interval_ms: int = 200
    max_fetch_duration_ms: int | None = None
    end_timestamp: str | None = None  # ISO-8601: stop before records that arrived later
    progress: dict[str, str] = field(default_factory=dict)  # streaming: where to record ends
    fail_on_data_loss: bool = True  # a shard gone before it was read: fail, or record it ended and skip it
    strict_aggregation: bool = False  # a malformed KPL aggregate fails the task instead of passing through whole
    fan_out: FanOutTarget | None = None  # consumerMode=efo: the registered consumer tasks subscribe with
    key_range: KeyRange | None = None  # hashKeyRange: keep only records whose hash key is inside (key_filter)
    stream_ref: StreamRef | None = None  # streamARN: how calls name the stream (by ARN); None: by ``stream``

    @property
    def reference(self) -> str | StreamRef:
        """The ``stream`` argument for readers and clients: the name, or the ref of a stream given by ARN."""
        return self.stream_ref.target if self.stream_ref is not None else self.stream

    @property
    def end_time(self):
        return parse_timestamp(self.end_timestamp) if self.end_timestamp else None
