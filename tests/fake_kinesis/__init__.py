"""One in-memory Kinesis for the unit tests: streams, shards, records, resharding, retention, EFO.

``from fake_kinesis import FakeKinesis`` (``tests/`` is on ``sys.path``). Modules: :mod:`.model`
(shards, records, faults, calls), :mod:`.client` (the calls), :mod:`.aio` (the async twin),
:mod:`.subscriptions` (one subscription per consumer and shard, when asked to).

``FakeKinesis`` answers the calls the readers make of
:class:`kinesis_src.aws.KinesisClient` (``describe_stream``, ``list_shards``,
``get_shard_iterator``, ``get_records``) and of
:class:`kinesis_src.aws.FanOut` (consumers and ``subscribe``), with the same
argument lists, return types and errors. ``fake.aio()`` is the
:class:`~kinesis_src.aws.async_kinesis.AsyncKinesisClient` /
:class:`~kinesis_src.aws.AsyncFanOut` twin over the same state, calls and faults.

The model, grown from ``tests/unit/lineage_model.py``'s simulator:
* a shard has an id, parents, a hash range, a starting and (once closed) an
  ending sequence number, and records in sequence order; sequence numbers
  compare as integers, and generated ones grow across the whole fake;
* ``split_shard`` / ``merge_shards`` close parents and create children as
  Kinesis does; ``create_stream(listing=...)`` / ``set_listing`` take raw
  ListShards dicts for shapes no reshard produces (gaps, changed parents);
* a record's arrival time is the fake's ``clock`` (or given; the clock then
  follows it); ``trim`` applies retention, ``drop_shard`` trims a whole shard;
* an iterator remembers the sequence number it reads after, so trimming under
  it behaves like Kinesis: reading resumes at the oldest record left.
* a closed shard read to its end returns ``next_iterator=None`` (EFO: a null
  continuation) with its ``ChildShards``, on the page of its last records, or
  on an empty page after them with ``shard.end_page_apart``.

Test hooks: ``calls`` (every call, in order), ``count(method, shard_id)``;
``inject(method, error_or_gate, shard_id=, calls=)`` raises, or holds the call
at a :class:`Gate`; ``expire_iterators()``; ``shard.page_sizes`` (records per
next page or event), ``shard.lag_ms`` (MillisBehindLatest); endpoint quirks
``shard_filter`` ("supported" | "rejected" | "ignored") and
``ignores_exclusive_start``; ``events_per_subscription`` (a subscription's
5 minutes) and ``records_per_event``; ``subscriptions_open`` (made, and neither
ended nor closed by the reader) and ``open_subscriptions`` (the same per
(consumer ARN, shard)). ``FakeKinesis(concurrent_subscriptions=...)``
(:mod:`.subscriptions`): "allowed" (default, LocalStack) takes any number of
subscriptions of one consumer to one shard; "refused" refuses a second one while
one is open; "takeover" is AWS in full: refused while the open one is younger
than 5 s on the fake's ``clock`` (``advance`` it), then the new one takes over
and the old one fails at its next event. A refusal is what FanOut.subscribe
raises after its retries (RetriesExhaustedError over SubscriptionBusyError over
botocore's ResourceInUseException; no retry is waited out); a taken-over
subscription's events raise SubscriptionBusyError, as its event stream would. An error message on
the event stream: ``inject("subscribe_event", event_stream_error(code), ...)`` (botocore's own
EventStreamError), raised mapped as FanOut.subscribe's event stream maps it.
"""

from .aio import AsyncFakeKinesis
from .client import FakeKinesis
from .model import (
    MAX_HASH_KEY,
    START,
    Call,
    FakeRecord,
    FakeShard,
    FakeStream,
    Gate,
    shard_id,
    utc,
)
from .subscriptions import event_stream_error

__all__ = [
    "MAX_HASH_KEY",
    "START",
    "AsyncFakeKinesis",
    "Call",
    "FakeKinesis",
    "FakeRecord",
    "FakeShard",
    "FakeStream",
    "Gate",
    "event_stream_error",
    "shard_id",
    "utc",
]
