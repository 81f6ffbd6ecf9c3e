"""Kinesis calls used by kinesis-src, each retried and translated (see :mod:`.boundary`)."""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import botocore.session

from ..config import AwsSettings
from ..errors import (
    KinesisSourceError,
    ResourceNotFoundError,
    ShardNotFoundError,
    StreamNotFoundError,
    ThrottledError,
)
from ..identity import StreamIdentity
from ..positions import Position
from ..records import RecordPage
from ..stream_ref import StreamRef, as_ref
from .boundary import call, client_config, new_session, use_fast_parser
from .decode import page_of
from .fanout_calls import Call, Plan, drive

if TYPE_CHECKING:
    from .fanout import FanOut

log = logging.getLogger(__name__)
T = TypeVar("T")
Stream = str | StreamRef  # a plain string is a stream name; a StreamRef given by ARN is called by StreamARN


@dataclass(frozen=True)
class StreamSummary:
    name: str
    arn: str
    status: str
    open_shard_count: int
    retention_hours: int
    created: datetime | None = None  # StreamCreationTimestamp; None from endpoints that omit it

    @property
    def identity(self) -> StreamIdentity | None:
        """ARN + creation time: tells a recreated stream from the old one (see kinesis_src.identity)."""
        if self.created is None:
            return None
        created = self.created if self.created.tzinfo else self.created.replace(tzinfo=timezone.utc)
        return StreamIdentity(self.arn, created)


def shard_listing_plan(request: dict[str, Any], page_size: int) -> Plan[list[dict[str, Any]]]:
    """Every page of ListShards, following NextToken (both clients). NextToken must be sent without
    StreamName and the other arguments (the API rejects both together), so the first request differs."""
    shards: list[dict[str, Any]] = []
    while True:
        out = yield Call("list_shards", request)
        shards.extend(out.get("Shards", ()))
        token = out.get("NextToken")
        if not token:
            return shards
        request = {"NextToken": token, "MaxResults": page_size}


def stream_summary(out: dict[str, Any]) -> StreamSummary:
    """A DescribeStreamSummary answer, read (both clients)."""
    d = out["StreamDescriptionSummary"]
    return StreamSummary(
        name=d["StreamName"],
        arn=d["StreamARN"],
        status=d["StreamStatus"],
        open_shard_count=int(d.get("OpenShardCount", 0)),
        retention_hours=int(d.get("RetentionPeriodHours", 24)),
        created=d.get("StreamCreationTimestamp"),
    )


def stream_not_found(stream: str, endpoint: str, region: str) -> StreamNotFoundError:
    return StreamNotFoundError(
        f"stream {stream!r} does not exist at {endpoint} (region {region}). "
        "Check the stream name, the region and the endpoint (endpointUrl / endpoint_url), or create "
        "the stream first."
    )


def shard_not_found(stream: str, shard_id: str, endpoint: str) -> ShardNotFoundError:
    return ShardNotFoundError(
        f"shard {shard_id} is not part of stream {stream!r} at {endpoint}. It may never "
        "have existed or may have been trimmed past retention; list the stream's shards."
    )


class KinesisClient:
    """Kinesis calls used by kinesis-src, each retried and translated. Thread-safe, not picklable:
    one per process. ``session``, any botocore session, is not modified."""

    def __init__(self, settings: AwsSettings, session: botocore.session.Session | None = None) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint_url or f"Kinesis in {settings.region}"
        client = (session or new_session(settings)).create_client(
            "kinesis",
            region_name=settings.region,
            endpoint_url=settings.endpoint_url,
            config=client_config(settings),
        )
        self._client = client if session is None else use_fast_parser(client)  # a caller's session lacks our parser

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return call(what, self.endpoint, self.settings.retry, fn)

    @property
    def botocore_client(self) -> Any:
        """The botocore client, for the other modules of ``kinesis_src.aws`` (e.g. :mod:`.fanout`)."""
        return self._client

    def fan_out(self) -> FanOut:
        """Enhanced fan-out calls on this client (consumers, SubscribeToShard); fakes return their own."""
        from .fanout import FanOut  # noqa: PLC0415  (on use: most callers never fan out)

        return FanOut(self)

    # -- streams -------------------------------------------------------------------

    def describe_stream(self, stream: Stream) -> StreamSummary:
        ref = as_ref(stream)
        what = f"DescribeStreamSummary of stream {ref!r}"
        try:
            out = self._call(what, lambda: self._client.describe_stream_summary(**ref.api_args()))
        except ResourceNotFoundError as exc:
            raise self._stream_not_found(ref) from exc
        return stream_summary(out)

    def _stream_not_found(self, stream: Stream) -> StreamNotFoundError:
        return stream_not_found(as_ref(stream).label, self.endpoint, self.settings.region)

    def list_shards(
        self,
        stream: Stream,
        exclusive_start_shard_id: str | None = None,
        shard_filter: dict[str, Any] | None = None,
        page_size: int = 1000,
    ) -> list[dict[str, Any]]:
        """Every page of ListShards (:func:`shard_listing_plan`)."""
        ref = as_ref(stream)
        first: dict[str, Any] = {**ref.api_args(), "MaxResults": page_size}
        if exclusive_start_shard_id:
            first["ExclusiveStartShardId"] = exclusive_start_shard_id
        if shard_filter:
            first["ShardFilter"] = shard_filter
        pages = itertools.count(1)

        def page(request: Call) -> Any:
            try:
                return self._call(f"ListShards of stream {ref!r} (page {next(pages)})", lambda: request.on(self._client))
            except ResourceNotFoundError as exc:
                raise self._stream_not_found(stream) from exc

        return drive(shard_listing_plan(first, page_size), page)

    # -- reading -------------------------------------------------------------------

    def get_shard_iterator(self, stream: Stream, shard_id: str, position: Position) -> str:
        ref = as_ref(stream)
        what = f"GetShardIterator({position}) on shard {shard_id} of stream {ref!r}"
        try:
            out = self._call(
                what,
                lambda: self._client.get_shard_iterator(
                    **ref.api_args(), ShardId=shard_id, **position.iterator_args()
                ),
            )
        except ResourceNotFoundError as exc:
            raise self._stream_or_shard_missing(stream, shard_id) from exc
        return out["ShardIterator"]

    def _stream_or_shard_missing(self, stream: Stream, shard_id: str) -> ResourceNotFoundError:
        try:
            self.describe_stream(stream)
        except StreamNotFoundError as missing:
            return missing
        return shard_not_found(as_ref(stream).label, shard_id, self.endpoint)

    def get_records(self, iterator: str, limit: int, shard_id: str, stream: Stream) -> RecordPage:
        """``stream`` only names the stream in messages (the iterator says which shard is read)."""
        what = f"GetRecords on shard {shard_id} of stream {as_ref(stream)!r}"
        try:
            out = self._call(what, lambda: self._client.get_records(ShardIterator=iterator, Limit=limit))
        except ResourceNotFoundError as exc:
            raise self._stream_or_shard_missing(stream, shard_id) from exc
        return page_of(out)  # a malformed or cut body was named with `what` by boundary.translate

    # -- writing and administration (demo, tests, CLI) -----------------------------

    def create_stream(self, stream: str, shard_count: int) -> None:
        self._call(
            f"CreateStream {stream!r}",
            lambda: self._client.create_stream(StreamName=stream, ShardCount=shard_count),
        )

    def delete_stream(self, stream: str) -> None:
        self._call(
            f"DeleteStream {stream!r}",
            lambda: self._client.delete_stream(StreamName=stream, EnforceConsumerDeletion=True),
        )

    def wait_active(self, stream: str, timeout_s: float = 60.0, poll_s: float = 0.1) -> StreamSummary:
        """Poll until the stream is ACTIVE (after create, split, merge, resize)."""
        deadline = time.monotonic() + timeout_s
        while True:
            summary = self.describe_stream(stream)
            if summary.status == "ACTIVE":
                return summary
            if time.monotonic() > deadline:
                raise KinesisSourceError(
                    f"stream {stream!r} still {summary.status} after {timeout_s:.0f}s at {self.endpoint}"
                )
            time.sleep(poll_s)

    def split_shard(self, stream: str, shard_id: str, new_starting_hash_key: int) -> None:
        self._call(
            f"SplitShard {shard_id} of stream {stream!r}",
            lambda: self._client.split_shard(
                StreamName=stream, ShardToSplit=shard_id, NewStartingHashKey=str(new_starting_hash_key)
            ),
        )

    def merge_shards(self, stream: str, shard_id: str, adjacent_shard_id: str) -> None:
        self._call(
            f"MergeShards {shard_id}+{adjacent_shard_id} of stream {stream!r}",
            lambda: self._client.merge_shards(
                StreamName=stream, ShardToMerge=shard_id, AdjacentShardToMerge=adjacent_shard_id
            ),
        )

    def update_shard_count(self, stream: str, target: int) -> None:
        self._call(
            f"UpdateShardCount of stream {stream!r} to {target}",
            lambda: self._client.update_shard_count(
                StreamName=stream, TargetShardCount=target, ScalingType="UNIFORM_SCALING"
            ),
        )

    def put_records(
        self, stream: str, entries: Sequence[tuple[str, bytes]], max_rounds: int = 10
    ) -> list[dict[str, Any]]:
        """PutRecords, resending only the failed entries; per-entry results in input order. Order
        per partition key holds because each call returns before the next is sent."""
        results: list[dict[str, Any] | None] = [None] * len(entries)
        pending = list(range(len(entries)))
        for round_no in range(max_rounds):
            batch = [{"PartitionKey": entries[i][0], "Data": entries[i][1]} for i in pending]
            out = self._call(
                f"PutRecords ({len(batch)} records) to stream {stream!r}",
                lambda b=batch: self._client.put_records(StreamName=stream, Records=b),
            )
            failed = []
            for i, res in zip(pending, out["Records"]):
                if res.get("ErrorCode"):
                    failed.append(i)
                else:
                    results[i] = res
            if not failed:
                return results  # type: ignore[return-value]
            pending = failed
            time.sleep(min(2.0, 0.05 * 2**round_no))
        raise ThrottledError(
            f"PutRecords to stream {stream!r}: {len(pending)} record(s) still rejected after "
            f"{max_rounds} rounds"
        )

    def put_record(self, stream: str, partition_key: str, data: bytes) -> dict[str, Any]:
        return self._call(
            f"PutRecord to stream {stream!r}",
            lambda: self._client.put_record(StreamName=stream, PartitionKey=partition_key, Data=data),
        )

