"""FakeKinesis: the model behind KinesisClient's and FanOut's calls (see the package docstring)."""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Self

from botocore.exceptions import ClientError

from kinesis_src.aws.fanout import (
    CONSUMER_LIMIT,
    ConsumerDescription,
    FanOutEvent,
    consumer_limit,
    consumer_stream_arn,
    event_from,
)
from kinesis_src.aws.fanout_model import subscribe_request
from kinesis_src.aws.kinesis import StreamSummary, shard_not_found, stream_not_found
from kinesis_src.errors import (
    InvalidRequestError,
    IteratorExpiredError,
    ResourceNotFoundError,
)
from kinesis_src.positions import Position
from kinesis_src.records import RecordPage

from .aio import AsyncFakeKinesis
from .model import (
    ACCOUNT_ARN,
    MAX_HASH_KEY,
    SEQUENCE_BASE,
    START,
    Call,
    FakeRecord,
    FakeShard,
    FakeStream,
    Fault,
    Gate,
    passes_filter,
    reads_after,
    utc,
)
from .subscriptions import (
    ConcurrentSubscriptions,
    OpenSubscription,
    SubscriptionState,
    SubscriptionTable,
    mapped_stream_error,
    taken_over,
)


class FakeKinesis:
    """The in-memory Kinesis (see the module docstring); pass it wherever a KinesisClient or FanOut goes."""

    endpoint = "fake-kinesis"
    region = "us-east-1"

    def __init__(self, *, clock: float = START, concurrent_subscriptions: ConcurrentSubscriptions = "allowed") -> None:
        self.clock = clock
        self.concurrent_subscriptions = concurrent_subscriptions
        self.streams: dict[str, FakeStream] = {}
        self.calls: list[Call] = []
        self.counts: Counter[tuple[str, str | None]] = Counter()
        self.faults: list[Fault] = []
        self.shard_filter = "supported"
        self.ignores_exclusive_start = False
        self.events_per_subscription = 100
        self.records_per_event = 1000
        self.subscriptions = SubscriptionTable()
        self.idle_delay_s = 0.001  # the async twin's pause on an empty page (no busy loop)
        self._sequence = itertools.count(SEQUENCE_BASE)
        self._generation = 0

    def aio(self) -> AsyncFakeKinesis:
        return AsyncFakeKinesis(self)

    # -- test hooks ---------------------------------------------------------------------------------

    def inject(self, method: str, action: BaseException | Gate, *, shard_id: str | None = None,
               calls: Iterable[int] | None = None) -> Any:
        """Raise ``action`` (or hold at it) on the given calls of ``method`` (the next one by default)."""
        self.faults.append(Fault(method, action, shard_id, None if calls is None else frozenset(calls)))
        return action

    @property
    def subscriptions_open(self) -> int:
        """Subscriptions made and not yet ended or closed by the reader."""
        return sum(self.subscriptions.counts().values())

    @property
    def open_subscriptions(self) -> dict[tuple[str, str], int]:
        """The same, per (consumer ARN, shard id)."""
        return self.subscriptions.counts()

    def count(self, method: str, shard_id: str | None = None) -> int:
        return self.counts[(method, shard_id)]

    def calls_to(self, method: str, shard_id: str | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method and shard_id in (None, c.shard_id)]

    def expire_iterators(self) -> None:
        """Every iterator handed out so far now raises IteratorExpiredError (as after 5 minutes)."""
        self._generation += 1

    def advance(self, seconds: float) -> None:
        self.clock += seconds

    def enter(self, method: str, stream: str | None = None, shard_id: str | None = None,
              position: Position | None = None, **args: Any) -> Gate | None:
        """Record a call, then apply the first matching fault: raise it, or return the gate to wait at."""
        self.calls.append(Call(method, stream, shard_id, position, args))
        self.counts[(method, None)] += 1
        if shard_id is not None:
            self.counts[(method, shard_id)] += 1
        for fault in self.faults:
            if fault.method != method or fault.shard_id not in (None, shard_id):
                continue
            if fault.calls is None:
                self.faults.remove(fault)
            elif self.count(method, fault.shard_id) not in fault.calls:
                continue
            if isinstance(fault.action, Gate):
                return fault.action
            raise fault.action
        return None

    # -- streams and shards (admin and test setup) ----------------------------------------------------

    def create_stream(self, stream: str, shard_count: int = 1, *, listing: list[dict[str, Any]] | None = None,
                      arn: str | None = None, created: datetime | None = None, retention_hours: int = 24) -> FakeStream:
        s = FakeStream(stream, arn or ACCOUNT_ARN + stream, created or utc(self.clock), retention_hours)
        self.streams[stream] = s
        if listing is not None:
            self.set_listing(stream, listing)
        for i in range(0 if listing is not None else shard_count):
            lo, hi = (MAX_HASH_KEY + 1) * i // shard_count, (MAX_HASH_KEY + 1) * (i + 1) // shard_count - 1
            self._new_shard(s, lo, hi, ())
        return s

    def delete_stream(self, stream: str) -> None:
        del self.streams[self.stream(stream).name]

    def stream(self, stream: str) -> FakeStream:
        if stream not in self.streams:
            raise stream_not_found(stream, self.endpoint, self.region)
        return self.streams[stream]

    def shard(self, stream: str, sid: str) -> FakeShard:
        s = self.stream(stream)
        if sid not in s.shards:
            raise shard_not_found(stream, sid, self.endpoint)
        return s.shards[sid]

    def set_listing(self, stream: str, listing: list[dict[str, Any]]) -> None:
        """Replace the shards by raw ListShards dicts; shards that stay keep their records."""
        s = self.stream(stream)
        old, s.shards = s.shards, {}
        for raw in listing:
            shard = FakeShard.from_listing(raw, self.clock)
            if raw["ShardId"] in old:
                shard.records, shard.keys = old[raw["ShardId"]].records, old[raw["ShardId"]].keys
            s.shards[shard.shard_id] = shard

    def _new_shard(self, s: FakeStream, lo: int, hi: int, parents: tuple[str, ...]) -> FakeShard:
        shard = FakeShard(s.next_id(), lo, hi, parents, str(next(self._sequence)), created=self.clock)
        s.shards[shard.shard_id] = shard
        return shard

    def _close(self, shard: FakeShard) -> None:
        assert not shard.closed, f"{shard.shard_id} is closed already"
        shard.ending_sequence, shard.closed_at = str(next(self._sequence)), self.clock

    def split_shard(self, stream: str, shard_id: str, new_starting_hash_key: int) -> tuple[str, str]:
        s, parent = self.stream(stream), self.shard(stream, shard_id)
        assert parent.start < new_starting_hash_key <= parent.end, "the new starting hash key is outside the shard"
        self._close(parent)
        left = self._new_shard(s, parent.start, new_starting_hash_key - 1, (shard_id,))
        return left.shard_id, self._new_shard(s, new_starting_hash_key, parent.end, (shard_id,)).shard_id

    def merge_shards(self, stream: str, shard_id: str, adjacent_shard_id: str) -> str:
        s, a, b = self.stream(stream), self.shard(stream, shard_id), self.shard(stream, adjacent_shard_id)
        assert a.end + 1 == b.start or b.end + 1 == a.start, "merged shards must be adjacent"
        self._close(a)
        self._close(b)
        return self._new_shard(s, min(a.start, b.start), max(a.end, b.end), (shard_id, adjacent_shard_id)).shard_id

    def drop_shard(self, stream: str, shard_id: str) -> None:
        """The shard is trimmed whole: no longer listed, its iterators fail with ShardNotFoundError."""
        del self.stream(stream).shards[shard_id]

    def trim(self, stream: str, before: float | None = None) -> list[str]:
        """Retention: drop records that arrived before ``before`` (default: clock - retention) and closed
        shards closed before it; returns the dropped shard ids."""
        s = self.stream(stream)
        cut = self.clock - s.retention_hours * 3600 if before is None else before
        gone = [sid for sid, sh in s.shards.items() if sh.closed_at is not None and sh.closed_at < cut]
        for sid in gone:
            del s.shards[sid]
        for sh in s.shards.values():
            keep = next((i for i, r in enumerate(sh.records) if r.arrival >= cut), len(sh.records))
            del sh.records[:keep], sh.keys[:keep]
        return gone

    # -- writing ------------------------------------------------------------------------------------

    def put_record(self, stream: str, partition_key: str, data: bytes, *, explicit_hash_key: str | None = None,
                   shard_id: str | None = None, sequence_number: str | None = None,
                   arrival: float | None = None) -> dict[str, Any]:
        """Route by the key's MD5 (or ``explicit_hash_key``) to its open shard, or append to ``shard_id``."""
        s = self.stream(stream)
        if shard_id is None:
            point = int(explicit_hash_key) if explicit_hash_key else int(hashlib.md5(partition_key.encode()).hexdigest(), 16)
            shard_id = next(sh.shard_id for sh in s.open_shards() if sh.start <= point <= sh.end)
        shard = self.shard(stream, shard_id)
        seq = sequence_number or str(next(self._sequence))
        assert not shard.keys or int(seq) > shard.keys[-1], f"{shard_id}: sequence number {seq} is not after the last"
        if arrival is None:
            arrival, self.clock = self.clock, self.clock + 0.001
        self.clock = max(self.clock, arrival)
        shard.records.append(FakeRecord(seq, partition_key, bytes(data), arrival))
        shard.keys.append(int(seq))
        return {"ShardId": shard_id, "SequenceNumber": seq}

    def put_records(self, stream: str, entries: Iterable[tuple[str, bytes]], max_rounds: int = 10) -> list[dict[str, Any]]:
        return [self.put_record(stream, key, data) for key, data in entries]

    # -- KinesisClient --------------------------------------------------------------------------------

    def fan_out(self) -> Self:
        """KinesisClient.fan_out(): the fake answers the FanOut calls itself."""
        return self

    def describe_stream(self, stream: str) -> StreamSummary:
        self.enter("describe_stream", stream)
        return self.summary(stream)

    def summary(self, stream: str) -> StreamSummary:
        s = self.stream(stream)
        return StreamSummary(s.name, s.arn, s.status, len(s.open_shards()), s.retention_hours, s.created)

    def wait_active(self, name: str, **_: Any) -> Any:
        """KinesisClient.wait_active(stream) and FanOut.wait_active(consumer_arn): both are ACTIVE at once."""
        return self.describe_consumer(name) if "/consumer/" in name else self.describe_stream(name)

    def list_shards(self, stream: str, exclusive_start_shard_id: str | None = None,
                    shard_filter: dict[str, Any] | None = None, page_size: int = 1000) -> list[dict[str, Any]]:
        self.enter("list_shards", stream, exclusive_start_shard_id=exclusive_start_shard_id, shard_filter=shard_filter)
        if shard_filter and self.shard_filter == "rejected":
            raise InvalidRequestError("ListShards: InvalidArgumentException: ShardFilter not supported")
        shards = self._sorted_shards(stream)
        if exclusive_start_shard_id and not self.ignores_exclusive_start:
            shards = [sh for sh in shards if sh.shard_id > exclusive_start_shard_id]
        if shard_filter and self.shard_filter == "supported":
            shards = [sh for sh in shards if passes_filter(sh, shard_filter)]
        return [sh.listing() for sh in shards]

    def listing(self, stream: str) -> list[dict[str, Any]]:
        """The whole stream's ListShards answer, without recording a call (the async twin records its own)."""
        return [sh.listing() for sh in self._sorted_shards(stream)]

    def _sorted_shards(self, stream: str) -> list[Any]:
        return sorted(self.stream(stream).shards.values(), key=lambda sh: sh.shard_id)

    def get_shard_iterator(self, stream: str, shard_id: str, position: Position) -> str:
        self._wait(self.enter("get_shard_iterator", stream, shard_id, position))
        return self.iterator(stream, shard_id, position)

    def iterator(self, stream: str, shard_id: str, position: Position) -> str:
        """GetShardIterator's answer, without recording a call (the async twin records its own)."""
        return f"{stream}|{shard_id}|{reads_after(self.shard(stream, shard_id), position)}|{self._generation}"

    def get_records(self, iterator: str, limit: int, shard_id: str, stream: str) -> RecordPage:
        self._wait(self.enter("get_records", stream, shard_id, limit=limit))
        return self.page(iterator, limit)

    def page(self, iterator: str, limit: int) -> RecordPage:
        """GetRecords' answer, without recording a call (the async twin records its own)."""
        stream, sid, after, generation = iterator.split("|")
        if int(generation) != self._generation:
            raise IteratorExpiredError(f"Iterator expired: {iterator}")
        shard = self.shard(stream, sid)
        records, ended, lag = self._take(shard, int(after), limit)
        last = records[-1].sequence_number if records else after
        return RecordPage(
            partition_keys=[r.partition_key for r in records], data=[r.data for r in records],
            sequence_numbers=[r.sequence_number for r in records], arrival_epoch=[r.arrival for r in records],
            encryption_types=[None] * len(records), next_iterator=None if ended else f"{stream}|{sid}|{last}|{generation}",
            millis_behind_latest=lag, child_shards=self.stream(stream).children(sid) if ended else (),
        )

    def _take(self, shard: FakeShard, after: int, limit: int) -> tuple[list[FakeRecord], bool, int]:
        first = bisect.bisect_right(shard.keys, after)
        n = min(limit, shard.page_sizes.pop(0)) if shard.page_sizes else limit
        records = shard.records[first : first + n]
        at_tip = first + len(records) == len(shard.records)
        ended = shard.closed and at_tip and not (shard.end_page_apart and records)
        lag = 0 if at_tip else max(1, int((self.clock - shard.records[first + len(records)].arrival) * 1000))
        return records, ended, lag if shard.lag_ms is None else shard.lag_ms

    @staticmethod
    def _wait(gate: Gate | None) -> None:
        if gate is not None:
            gate.wait()

    # -- FanOut: consumers and SubscribeToShard -------------------------------------------------------

    def _stream_of(self, arn: str) -> FakeStream:
        found = [s for s in self.streams.values() if s.arn == arn]
        if not found:
            raise ResourceNotFoundError(f"no stream {arn} at {self.endpoint}")
        return found[0]

    def register_consumer(self, stream_arn: str, name: str, *, timeout_s: float = 60.0) -> ConsumerDescription:
        self.enter("register_consumer", consumer_name=name, stream_arn=stream_arn)
        s = self._stream_of(stream_arn)
        if name not in s.consumers:
            if len(s.consumers) >= CONSUMER_LIMIT:
                raise consumer_limit(stream_arn, sorted(s.consumers))
            arn = f"{stream_arn}/consumer/{name}:{int(self.clock)}"
            s.consumers[name] = ConsumerDescription(name, arn, "ACTIVE", utc(self.clock))
        return s.consumers[name]

    def describe_consumer(self, consumer_arn: str) -> ConsumerDescription:
        self.enter("describe_consumer", consumer_arn=consumer_arn)
        return self._consumer(consumer_arn)

    def _consumer(self, consumer_arn: str) -> ConsumerDescription:
        s = self._stream_of(consumer_stream_arn(consumer_arn))
        found = [c for c in s.consumers.values() if c.arn == consumer_arn]
        if not found:
            raise ResourceNotFoundError(f"consumer {consumer_arn} is not registered at {self.endpoint}")
        return found[0]

    def deregister_consumer(self, consumer_arn: str) -> bool:
        self.enter("deregister_consumer", consumer_arn=consumer_arn)
        try:
            consumer = self._consumer(consumer_arn)
        except ResourceNotFoundError:
            return False
        del self._stream_of(consumer.stream_arn).consumers[consumer.name]
        return True

    def list_consumers(self, stream_arn: str) -> list[ConsumerDescription]:
        self.enter("list_consumers", stream_arn=stream_arn)
        return list(self._stream_of(stream_arn).consumers.values())

    def subscribe(self, consumer_arn: str, shard_id: str, position: Position, *,
                  stream_arn: str | None = None) -> Iterator[FanOutEvent]:
        items = self.subscription(consumer_arn, shard_id, position, stream_arn)
        try:
            for item in items:
                if isinstance(item, Gate):
                    item.wait()
                else:
                    yield item
        finally:
            items.close()

    def subscription(self, consumer_arn: str, shard_id: str, position: Position,
                     stream_arn: str | None) -> Iterator[FanOutEvent | Gate]:
        """The events of one subscription, and the gates to wait at between them (for both twins)."""
        what, _ = subscribe_request(consumer_arn, shard_id, position, stream_arn)
        name = consumer_stream_arn(consumer_arn).rsplit("/", 1)[-1]
        gate = self.enter("subscribe", name, shard_id, position, consumer_arn=consumer_arn)
        if gate is not None:
            yield gate
        consumer = self._consumer(consumer_arn)
        s = self._stream_of(consumer.stream_arn)
        after = reads_after(self.shard(s.name, shard_id), position)
        sub = self.subscriptions.start(self.concurrent_subscriptions, what, (consumer_arn, shard_id), self.clock,
                                       self.endpoint)
        try:
            yield from self._events(s, consumer, sub, after)
        finally:
            self.subscriptions.end(sub)

    def _events(self, s: FakeStream, consumer: ConsumerDescription, sub: OpenSubscription,
                after: int) -> Iterator[FanOutEvent | Gate]:
        shard_id = sub.pair[1]
        for _ in range(self.events_per_subscription):
            try:
                gate = self.enter("subscribe_event", s.name, shard_id)
            except ClientError as error:  # botocore's own (event_stream_error): mapped as FanOut's stream maps it
                raise mapped_stream_error(error, sub, self.endpoint) from error
            if gate is not None:
                yield gate
            if sub.state is SubscriptionState.TAKEN_OVER:
                raise taken_over(sub, self.endpoint)
            if consumer.name not in s.consumers or shard_id not in s.shards:
                return  # deregistered or trimmed: the service ends the subscription
            records, ended, lag = self._take(s.shards[shard_id], after, self.records_per_event)
            after = int(records[-1].sequence_number) if records else after
            yield event_from({
                "Records": [{"SequenceNumber": r.sequence_number, "PartitionKey": r.partition_key, "Data": r.data,
                             "ApproximateArrivalTimestamp": utc(r.arrival)} for r in records],
                "ContinuationSequenceNumber": None if ended else str(max(after, 0)),
                "MillisBehindLatest": lag,
                "ChildShards": [{"ShardId": c.shard_id, "ParentShards": list(c.parent_shards),
                                 "HashKeyRange": {"StartingHashKey": str(c.starting_hash_key),
                                                  "EndingHashKey": str(c.ending_hash_key)}}
                                for c in (s.children(shard_id) if ended else ())],
            })
            if ended:
                return
