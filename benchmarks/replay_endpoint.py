"""A fast Kinesis replay endpoint for benchmarks (issue #12): the client is what gets measured.

The emulators are slower than the clients they serve (kinesalite at 99 % of a
core while the Consumer uses 23 %), so throughput figures taken on them
measure the emulator. This endpoint serves one stream of pre-encoded records
over the Kinesis JSON 1.1 protocol, fast enough that a reader on the other
end is the bound::

    from replay_endpoint import ReplayEndpoint          # benchmarks/ on sys.path

    with ReplayEndpoint(shards=4, records_per_shard=100_000, size=200,
                        latency_s=0.0, lineage="flat") as ep:
        kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=ep.endpoint_url))
        ...                                              # stream ep.stream_name; ep.stats() is the server's side

    .venv/bin/python benchmarks/replay_endpoint.py serve --shards 4 --records-per-shard 100000
    .venv/bin/python benchmarks/replay_endpoint.py measure       # its own capacity (docs/performance.md)

What it answers (anything else is ``UnknownOperationException``):

* ``ListShards``: ShardFilter ``AT_TRIM_HORIZON`` / ``FROM_TRIM_HORIZON`` /
  ``AT_LATEST`` / ``AT_TIMESTAMP`` / ``FROM_TIMESTAMP`` / ``AFTER_SHARD_ID``,
  ``ExclusiveStartShardId``, ``MaxResults`` and ``NextToken`` (sent without
  ``StreamName``, as AWS requires); closed shards carry
  ``EndingSequenceNumber``, children ``ParentShardId`` /
  ``AdjacentParentShardId``.
* ``DescribeStreamSummary``: ACTIVE, open shard count, 24 h retention, a
  creation time before the first record.
* ``GetShardIterator``: all five iterator types. An iterator is the text
  ``<shard ordinal>-<offset>``; sequence numbers and arrival times are
  arithmetic in the offset, so every type is an O(1) lookup (the closed form
  of a bisect). It never expires.
* ``GetRecords``: up to ``Limit`` (1..10,000) records and at most 10 MB of
  data, ``NextShardIterator``, ``MillisBehindLatest`` (0 at an open shard's
  tip), and on a closed shard's last page no iterator and ``ChildShards``
  (the page that holds the last records, not an empty page after them).
* ``GET /stats`` (not Kinesis): calls per operation, records and bytes
  served, and the server process's CPU seconds, for benchmarks to show the
  endpoint was not the bound.

Records: shard ``s`` (ordinal in creation order) holds ``records_per_shard``
records. Sequence numbers are 56-digit decimal strings, increasing within a
shard and from older shards to newer ones, with gaps between records (so
AT/AFTER a number that is no record behaves as Kinesis does). Arrival times
are whole milliseconds, spaced evenly over the shard's life, all in the past
when the endpoint starts. Data is ``<shard id>/<offset, 9 digits>/`` followed
by deterministic random bytes up to ``size`` (cut to ``size`` when shorter);
partition keys are chosen so their MD5 falls in the shard's hash range, as a
producer's would.

Lineages: ``flat`` is ``shards`` open shards. ``split_merge`` (``shards`` >=
2) splits shard 0 at the middle of its range into children ``n`` and
``n+1`` (``n`` = ``shards``), then merges child ``n+1`` with the adjacent
shard 1 into ``n+2``. Time runs in three phases of ``records_per_shard``
milliseconds: shard 0 lives in phase 1, shard 1 and child ``n+1`` close at
the merge (end of phase 2), child ``n`` and the merge child are open at the
end, as are shards 2.. which live through all three.

Every body is built at start: each shard's records are JSON fragments joined
with commas into one buffer, with the offset of every fragment, so a
GetRecords answer is a slice of that buffer between a fixed head and a tail
holding the next iterator (measured faster than joining per-record fragments
per call: docs/performance.md). The server is one asyncio loop with a
hand-written HTTP/1.1 keep-alive parser (``asyncio.Protocol``; botocore and
aiohttp send Content-Length bodies). ``latency_s`` delays every answer with
``call_later``, so other connections are not held up. ``mode="process"``
(the default) runs the server in a child process, so the client's CPU
(``time.process_time()``) does not include the server's (the child exits
when its stdin pipe from the parent closes, so it never outlives a
crashed benchmark); ``mode="thread"`` runs it on a thread of the caller
(quicker to start; unit tests). There is no throttling and no retention.

The server imports only the standard library: the child process starts
fast, and the endpoint does not depend on the code it measures (only the
``measure`` command imports boto3 and kinesis_src, for its client rows).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import http.client
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self

STREAM = "replay"
REGION = "us-east-1"
ACCOUNT = "000000000000"
LINEAGES = ("flat", "split_merge")
MAX_HASH_KEY = 2**128 - 1
MAX_LIMIT = 10_000  # GetRecords' Limit maximum
MAX_PAGE_BYTES = 10 * 1024 * 1024  # GetRecords returns at most 10 MB of data per call
RETENTION_HOURS = 24

SEQ_BASE = 49 * 10**54  # 56 digits, as Kinesis sequence numbers have
SEQ_SHARD_SPAN = 10**40  # shard s starts at SEQ_BASE + s * SEQ_SHARD_SPAN
SEQ_STRIDE = 1_000_003  # between consecutive records: numbers in between are no record

_PAGE_HEAD = b'{"Records":['
_JSON_HEADERS = b"Content-Type: application/x-amz-json-1.1\r\nx-amzn-RequestId: replay\r\n"
_MAX_HEAD = 64 * 1024


# -- the stream: shards, lineage, records -------------------------------------------------------------


@dataclass
class ReplayShard:
    """One shard's lineage facts and record arithmetic (the bytes live in :class:`ShardBodies`)."""

    ordinal: int
    start_hash: int
    end_hash: int
    created_ms: int  # stream creation, or the reshard that made it
    count: int  # records
    first_ms: int  # arrival of record 0
    interval_ms: int  # arrivals are first_ms + k * interval_ms
    closed_ms: int | None = None  # the reshard that closed it
    parent: str | None = None
    adjacent_parent: str | None = None
    children: list[ReplayShard] = field(default_factory=list)

    @property
    def shard_id(self) -> str:
        return shard_id(self.ordinal)

    @property
    def closed(self) -> bool:
        return self.closed_ms is not None

    @property
    def starting_sequence(self) -> int:
        return SEQ_BASE + self.ordinal * SEQ_SHARD_SPAN

    def sequence_number(self, offset: int) -> str:
        return str(self.starting_sequence + (offset + 1) * SEQ_STRIDE)

    def ending_sequence(self) -> str:
        return self.sequence_number(self.count - 1) if self.count else str(self.starting_sequence)

    def arrival_ms(self, offset: int) -> int:
        return self.first_ms + offset * self.interval_ms

    def offset_at_sequence(self, number: int, after: bool) -> int:
        """The first record AT (or AFTER) ``number``; ``count`` when none is left."""
        steps = number - self.starting_sequence  # record k has steps (k + 1) * SEQ_STRIDE
        offset = steps // SEQ_STRIDE if after else -(-steps // SEQ_STRIDE) - 1
        return min(max(offset, 0), self.count)

    def offset_at_time(self, epoch_us: int) -> int:
        """The first record that arrived at or after ``epoch_us`` (microseconds)."""
        offset = -(-(epoch_us - self.first_ms * 1000) // (self.interval_ms * 1000))
        return min(max(offset, 0), self.count)

    def open_at(self, epoch_ms: float) -> bool:
        return self.created_ms <= epoch_ms and (self.closed_ms is None or epoch_ms < self.closed_ms)

    def listing(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ShardId": self.shard_id}
        if self.parent:
            out["ParentShardId"] = self.parent
        if self.adjacent_parent:
            out["AdjacentParentShardId"] = self.adjacent_parent
        out["HashKeyRange"] = {"StartingHashKey": str(self.start_hash), "EndingHashKey": str(self.end_hash)}
        seq_range = {"StartingSequenceNumber": str(self.starting_sequence)}
        if self.closed:
            seq_range["EndingSequenceNumber"] = self.ending_sequence()
        out["SequenceNumberRange"] = seq_range
        return out

    def child_entry(self) -> dict[str, Any]:
        """This shard as a ``ChildShards`` item on its parents' last page."""
        parents = [p for p in (self.parent, self.adjacent_parent) if p]
        return {
            "ShardId": self.shard_id,
            "ParentShards": parents,
            "HashKeyRange": {"StartingHashKey": str(self.start_hash), "EndingHashKey": str(self.end_hash)},
        }


def shard_id(ordinal: int) -> str:
    return f"shardId-{ordinal:012d}"


@dataclass
class ReplayStream:
    """The stream an endpoint serves: deterministic in its arguments (``now_ms`` anchors the clock)."""

    name: str
    shards: list[ReplayShard]
    created_ms: int
    size: int

    @property
    def arn(self) -> str:
        return f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{self.name}"

    @property
    def records(self) -> int:
        return sum(s.count for s in self.shards)

    def shard(self, shard_id_: str) -> ReplayShard | None:
        for shard in self.shards:
            if shard.shard_id == shard_id_:
                return shard
        return None

    def data(self, shard: ReplayShard, offset: int) -> bytes:
        """Record ``offset``'s data: ``<shard id>/<offset>/`` then filler, exactly ``size`` bytes."""
        prefix = f"{shard.shard_id}/{offset:09d}/".encode()
        return (prefix + _filler(self.size, shard.ordinal))[: self.size]


def plan_stream(
    shards: int,
    records_per_shard: int,
    lineage: str = "flat",
    *,
    size: int = 200,
    stream_name: str = STREAM,
    now_ms: int | None = None,
) -> ReplayStream:
    """The shards, their lineage and their records' arithmetic; no bytes yet."""
    if lineage not in LINEAGES:
        raise ValueError(f"lineage={lineage!r}; expected one of {', '.join(LINEAGES)}")
    if shards < (2 if lineage == "split_merge" else 1):
        raise ValueError(f"shards={shards} is too few for lineage {lineage!r}")
    if records_per_shard < 0 or size < 0:
        raise ValueError("records_per_shard and size must be >= 0")
    phases = 3 if lineage == "split_merge" else 1
    phase_ms = max(records_per_shard, 1)  # a shard living one phase gets one record per millisecond
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    created = now_ms - phases * phase_ms - 60_000  # the newest record is about a minute old at start
    t0 = created + 1000
    t_split, t_merge, t_end = t0 + phase_ms, t0 + 2 * phase_ms, t0 + phases * phase_ms
    width = (MAX_HASH_KEY + 1) // shards
    out = []
    for i in range(shards):
        end_hash = MAX_HASH_KEY if i == shards - 1 else (i + 1) * width - 1
        until = {0: t_split, 1: t_merge}.get(i, t_end) if lineage == "split_merge" else t_end
        out.append(_shard(i, i * width, end_hash, created, t0, until, records_per_shard))
    if lineage == "split_merge":
        s0, s1 = out[0], out[1]
        mid = (s0.start_hash + s0.end_hash + 1) // 2
        low = _shard(shards, s0.start_hash, mid - 1, t_split, t_split, t_end, records_per_shard)
        high = _shard(shards + 1, mid, s0.end_hash, t_split, t_split, t_merge, records_per_shard)
        merged = _shard(shards + 2, mid, s1.end_hash, t_merge, t_merge, t_end, records_per_shard)
        low.parent = high.parent = s0.shard_id
        merged.parent, merged.adjacent_parent = high.shard_id, s1.shard_id
        s0.closed_ms, s0.children = t_split, [low, high]
        s1.closed_ms = high.closed_ms = t_merge
        s1.children = high.children = [merged]
        out += [low, high, merged]
    return ReplayStream(stream_name, out, created, size)


def _shard(ordinal: int, lo: int, hi: int, created: int, first: int, until: int, count: int) -> ReplayShard:
    """A shard whose ``count`` records arrive evenly from ``first`` to before ``until``."""
    interval = max(1, (until - first) // max(count, 1))
    return ReplayShard(ordinal, lo, hi, created, count, first, interval)


_FILLERS: dict[tuple[int, int], bytes] = {}


def _filler(size: int, seed: int) -> bytes:
    key = (size, seed)
    if key not in _FILLERS:
        _FILLERS[key] = random.Random(seed).randbytes(size)
    return _FILLERS[key]


def _partition_keys(stream: ReplayStream, per_shard: int = 64) -> dict[int, list[bytes]]:
    """Partition keys whose MD5 hash key falls in each shard's range (as a producer's keys would)."""
    pools: dict[int, list[bytes]] = {s.ordinal: [] for s in stream.shards}
    ranges = sorted((s.start_hash, s.end_hash, s.ordinal) for s in stream.shards)
    for i in range(200_000):
        key = f"pk-{i}".encode()
        hash_key = int.from_bytes(hashlib.md5(key).digest(), "big")
        for lo, hi, ordinal in ranges:
            if lo <= hash_key <= hi and len(pools[ordinal]) < per_shard:
                pools[ordinal].append(key)
        if all(len(p) >= per_shard for p in pools.values()):
            break
    return {o: p or [f"pk-{o}".encode()] for o, p in pools.items()}


# -- pre-encoded bodies ----------------------------------------------------------------------------------


@dataclass
class ShardBodies:
    """One shard's records as one JSON buffer: record k is ``blob[starts[k]:starts[k + 1] - 1]``."""

    shard: ReplayShard
    blob: bytes
    starts: array
    children: bytes  # the ChildShards JSON array, for the last page of a closed shard


def encode_shard(stream: ReplayStream, shard: ReplayShard, keys: list[bytes]) -> ShardBodies:
    parts = []
    starts = array("q", [0])
    pos = 0
    name = shard.shard_id.encode()
    filler = _filler(stream.size, shard.ordinal)
    b64 = base64.b64encode
    for k in range(shard.count):
        ms = shard.first_ms + k * shard.interval_ms
        data = (b"%s/%09d/" % (name, k) + filler)[: stream.size]
        fragment = b'{"SequenceNumber":"%d","ApproximateArrivalTimestamp":%d.%03d,"Data":"%s","PartitionKey":"%s"}' % (
            shard.starting_sequence + (k + 1) * SEQ_STRIDE, ms // 1000, ms % 1000, b64(data), keys[k % len(keys)],
        )
        parts.append(fragment)
        pos += len(fragment) + 1
        starts.append(pos)
    children = json.dumps([c.child_entry() for c in shard.children], separators=(",", ":")).encode()
    return ShardBodies(shard, b",".join(parts), starts, children)


# -- the Kinesis operations --------------------------------------------------------------------------------


class KinesisError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Stats:
    calls: dict[str, int] = field(default_factory=dict)
    records: int = 0
    bytes_out: int = 0
    errors: int = 0
    connections: int = 0
    build_s: float = 0.0  # planning and pre-encoding the stream

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "records": self.records,
            "bytes_out": self.bytes_out,
            "errors": self.errors,
            "connections": self.connections,
            "build_s": self.build_s,
            "cpu_s": time.process_time(),
            "pid": os.getpid(),
        }


class ReplayService:
    """Answers Kinesis JSON requests from the pre-encoded stream; no I/O."""

    def __init__(self, stream: ReplayStream) -> None:
        started = time.perf_counter()
        self.stream = stream
        keys = _partition_keys(stream)
        self.bodies = [encode_shard(stream, s, keys[s.ordinal]) for s in stream.shards]
        self.views = [memoryview(b.blob) for b in self.bodies]
        self.by_id = {s.shard_id: s for s in stream.shards}
        self.stats = Stats(build_s=time.perf_counter() - started)
        self.page_cap = max(1, min(MAX_LIMIT, MAX_PAGE_BYTES // max(stream.size, 1)))
        self._ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "ListShards": self.list_shards,
            "DescribeStreamSummary": self.describe_stream_summary,
            "GetShardIterator": self.get_shard_iterator,
        }

    def handle(self, operation: str, body: bytes) -> tuple[int, list[Any]]:
        """(HTTP status, body parts) for one call."""
        calls = self.stats.calls
        calls[operation] = calls.get(operation, 0) + 1
        try:
            request = json.loads(body) if body else {}
            if not isinstance(request, dict):
                raise KinesisError("SerializationException", "request body is not a JSON object")
            if operation == "GetRecords":
                return 200, self.get_records(request)
            op = self._ops.get(operation)
            if op is None:
                raise KinesisError("UnknownOperationException", f"{operation or 'no X-Amz-Target'} is not served here")
            return 200, [json.dumps(op(request), separators=(",", ":")).encode()]
        except KinesisError as exc:
            self.stats.errors += 1
            return 400, [json.dumps({"__type": exc.code, "message": str(exc)}).encode()]
        except (ValueError, TypeError, KeyError) as exc:
            self.stats.errors += 1
            return 400, [json.dumps({"__type": "SerializationException", "message": repr(exc)}).encode()]

    # -- streams and shards

    def _check_stream(self, request: dict[str, Any]) -> None:
        name, arn = request.get("StreamName"), request.get("StreamARN")
        if name is None and arn is None:
            raise KinesisError("InvalidArgumentException", "StreamName or StreamARN is required")
        if (name is not None and name != self.stream.name) or (arn is not None and arn != self.stream.arn):
            raise KinesisError(
                "ResourceNotFoundException",
                f"Stream {name or arn} under account {ACCOUNT} not found.",
            )

    def describe_stream_summary(self, request: dict[str, Any]) -> dict[str, Any]:
        self._check_stream(request)
        return {
            "StreamDescriptionSummary": {
                "StreamName": self.stream.name,
                "StreamARN": self.stream.arn,
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": {"StreamMode": "PROVISIONED"},
                "RetentionPeriodHours": RETENTION_HOURS,
                "StreamCreationTimestamp": self.stream.created_ms / 1000,
                "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
                "EncryptionType": "NONE",
                "OpenShardCount": sum(1 for s in self.stream.shards if not s.closed),
                "ConsumerCount": 0,
            }
        }

    def list_shards(self, request: dict[str, Any]) -> dict[str, Any]:
        token = request.get("NextToken")
        if token is not None:
            if any(request.get(k) is not None for k in ("StreamName", "StreamARN", "ExclusiveStartShardId", "ShardFilter")):
                raise KinesisError(
                    "InvalidArgumentException", "NextToken cannot be combined with StreamName, "
                    "StreamARN, ExclusiveStartShardId or ShardFilter",
                )
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                index, after, shard_filter = state["i"], state["a"], state["f"]
            except (ValueError, KeyError, TypeError):
                raise KinesisError("InvalidArgumentException", "NextToken is not valid") from None
        else:
            self._check_stream(request)
            index, after, shard_filter = 0, request.get("ExclusiveStartShardId"), request.get("ShardFilter")
        limit = int(request.get("MaxResults") or 1000)
        if not 1 <= limit <= 10_000:
            raise KinesisError("InvalidArgumentException", f"MaxResults {limit} is not within 1..10000")
        shards = [s for s in self._filtered(shard_filter) if after is None or s.shard_id > after]
        page = shards[index : index + limit]
        out: dict[str, Any] = {"Shards": [s.listing() for s in page]}
        if index + limit < len(shards):
            state = {"i": index + limit, "a": after, "f": shard_filter}
            out["NextToken"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        return out

    def _filtered(self, shard_filter: dict[str, Any] | None) -> list[ReplayShard]:
        shards = self.stream.shards
        if not shard_filter:
            return shards
        kind = shard_filter.get("Type")
        if kind == "FROM_TRIM_HORIZON":  # nothing is trimmed: every shard
            return shards
        if kind == "AT_TRIM_HORIZON":  # open at the trim horizon, i.e. when the stream was created
            return [s for s in shards if s.open_at(self.stream.created_ms)]
        if kind == "AT_LATEST":
            return [s for s in shards if not s.closed]
        if kind == "AFTER_SHARD_ID":
            after = shard_filter.get("ShardId") or ""
            return [s for s in shards if s.shard_id > after]
        if kind in ("AT_TIMESTAMP", "FROM_TIMESTAMP"):
            at_ms = _epoch_us(shard_filter.get("Timestamp")) / 1000
            if kind == "AT_TIMESTAMP":
                return [s for s in shards if s.open_at(at_ms)]
            return [s for s in shards if s.closed_ms is None or s.closed_ms > at_ms]
        raise KinesisError("InvalidArgumentException", f"ShardFilter Type {kind!r} is not valid")

    # -- reading

    def get_shard_iterator(self, request: dict[str, Any]) -> dict[str, Any]:
        self._check_stream(request)
        shard = self.by_id.get(request.get("ShardId", ""))
        if shard is None:
            raise KinesisError(
                "ResourceNotFoundException",
                f"Shard {request.get('ShardId')} in stream {self.stream.name} under account {ACCOUNT} does not exist",
            )
        kind = request.get("ShardIteratorType")
        if kind == "TRIM_HORIZON":
            offset = 0
        elif kind == "LATEST":
            offset = shard.count
        elif kind == "AT_TIMESTAMP":
            offset = shard.offset_at_time(_epoch_us(request.get("Timestamp")))
        elif kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            text = request.get("StartingSequenceNumber")
            number = int(text) if isinstance(text, str) and text.isdigit() else -1
            last = int(shard.ending_sequence()) if shard.closed else None
            if number < shard.starting_sequence or (last is not None and number > last):
                raise KinesisError(
                    "InvalidArgumentException",
                    f"StartingSequenceNumber {text} used in GetShardIterator on shard {shard.shard_id} "
                    f"in stream {self.stream.name} under account {ACCOUNT} is invalid.",
                )
            offset = shard.offset_at_sequence(number, after=kind == "AFTER_SEQUENCE_NUMBER")
        else:
            raise KinesisError("InvalidArgumentException", f"ShardIteratorType {kind!r} is not valid")
        return {"ShardIterator": _iterator(shard.ordinal, offset).decode()}

    def get_records(self, request: dict[str, Any]) -> list[Any]:
        iterator = request.get("ShardIterator")
        try:
            ordinal_text, _, offset_text = iterator.partition("-")
            ordinal, offset = int(ordinal_text), int(offset_text)
            bodies = self.bodies[ordinal]
        except (AttributeError, ValueError, IndexError):
            raise KinesisError("InvalidArgumentException", f"ShardIterator {iterator!r} is not valid") from None
        shard = bodies.shard
        if not 0 <= offset <= shard.count:
            raise KinesisError("InvalidArgumentException", f"ShardIterator {iterator!r} is not valid")
        limit = request.get("Limit", MAX_LIMIT)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise KinesisError("InvalidArgumentException", f"Limit {limit!r} is not within 1..{MAX_LIMIT}")
        end = min(shard.count, offset + min(limit, self.page_cap))
        starts = bodies.starts
        records = self.views[ordinal][starts[offset] : starts[end] - 1] if end > offset else b""
        self.stats.records += end - offset
        if shard.closed and end == shard.count:
            tail = b'],"MillisBehindLatest":0,"ChildShards":%s}' % bodies.children
        else:
            behind = 0 if end == shard.count else max(1, shard.arrival_ms(shard.count - 1) - shard.arrival_ms(end))
            tail = b'],"NextShardIterator":"%s","MillisBehindLatest":%d}' % (_iterator(ordinal, end), behind)
        return [_PAGE_HEAD, records, tail]


def _iterator(ordinal: int, offset: int) -> bytes:
    return b"%d-%d" % (ordinal, offset)


def _epoch_us(value: Any) -> int:
    """A JSON timestamp (botocore sends epoch seconds) in whole microseconds."""
    if isinstance(value, str):
        value = float(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise KinesisError("InvalidArgumentException", f"Timestamp {value!r} is not epoch seconds")
    return round(value * 1_000_000)


# -- HTTP/1.1 on asyncio ------------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """Minimal HTTP/1.1 with keep-alive: Content-Length bodies, answers in request order."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.buf = bytearray()
        self.need = -1  # body bytes still expected for the parsed head; -1 while reading a head
        self.transport: asyncio.Transport | None = None
        self.closing = False
        self.method = self.path = self.target = b""  # of the request being read
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.service.stats.connections += 1
        self.server.open.add(self)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while not self.closing:
            if self.need < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        self._reply(431, [b'{"__type":"RequestHeaderFieldsTooLarge"}'], close=True)
                    return
                head = bytes(buf[:end])
                del buf[: end + 4]
                if not self._parse_head(head):
                    return
            if len(buf) < self.need:
                return
            body = bytes(buf[: self.need])
            del buf[: self.need]
            self.need = -1
            self._dispatch(body)

    def _parse_head(self, head: bytes) -> bool:
        """Request line and the four headers that matter, found in the lower-cased head (no per-line loop)."""
        line_end = head.find(b"\r\n")
        request_line = (head if line_end < 0 else head[:line_end]).split(b" ")
        if len(request_line) != 3:
            self._reply(400, [b'{"__type":"BadRequest"}'], close=True)
            return False
        self.method, self.path, version = request_line
        lower = head.lower()
        if _header(head, lower, b"transfer-encoding") is not None:
            self._reply(411, [b'{"__type":"LengthRequired"}'], close=True)
            return False
        connection = _header(head, lower, b"connection")
        self.close_after = (connection or b"").lower() == b"close" or (
            version == b"HTTP/1.0" and (connection or b"").lower() != b"keep-alive"
        )
        self.target = _header(head, lower, b"x-amz-target") or b""
        self.need = int(_header(head, lower, b"content-length") or 0)
        return True

    def _dispatch(self, body: bytes) -> None:
        if self.method == b"GET":
            if self.path.startswith(b"/stats"):
                self._reply(200, [json.dumps(self.server.service.stats.as_dict()).encode()], self.close_after)
            else:
                self._reply(200, [b'{"status":"running"}'], self.close_after)
            return
        operation = self.target.rpartition(b".")[2].decode("ascii", "replace")
        status, parts = self.server.service.handle(operation, body)
        latency = self.server.latency_s
        if latency > 0:  # equal delays keep answers in request order on a keep-alive connection
            asyncio.get_running_loop().call_later(latency, self._reply, status, parts, self.close_after)
        else:
            self._reply(status, parts, self.close_after)

    def _reply(self, status: int, parts: list[Any], close: bool) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        length = sum(len(p) for p in parts)
        reason = b"OK" if status == 200 else HTTPStatus(status).phrase.encode()
        head = b"HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\n%s\r\n" % (
            status, reason, _JSON_HEADERS, length, b"Connection: close\r\n" if close else b"",
        )
        if length > 65536:  # big page: no join copy, the transport sends (or buffers) each part
            transport.write(head)
            for part in parts:
                transport.write(part)
        else:
            transport.write(b"".join([head, *parts]))
        self.server.service.stats.bytes_out += len(head) + length
        if close:
            self.closing = True
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.open.discard(self)


def _header(head: bytes, lower: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case) in ``head``, or None."""
    start = lower.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = lower.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


class _Server:
    def __init__(self, service: ReplayService, latency_s: float) -> None:
        self.service = service
        self.latency_s = latency_s
        self.open: set[_Connection] = set()

    async def start(self, host: str, port: int) -> asyncio.AbstractServer:
        loop = asyncio.get_running_loop()
        return await loop.create_server(lambda: _Connection(self), host, port, backlog=256, reuse_address=True)

    async def serve_until(self, server: asyncio.AbstractServer, stop: asyncio.Event) -> None:
        """Serve until ``stop``; then drop the clients' keep-alive connections (Python 3.12+ waits for them)."""
        async with server:
            await stop.wait()
            server.close()
            for connection in list(self.open):
                if connection.transport is not None:
                    connection.transport.abort()


# -- the context manager ----------------------------------------------------------------------------------


class ReplayEndpoint:
    """A running replay endpoint: ``with ReplayEndpoint(...) as ep: ep.endpoint_url``.

    Binds 127.0.0.1 on a free port (or ``port``). ``mode="process"`` runs the
    server in a child process (stopped by its PID on exit), so the caller's
    CPU time excludes the server's; ``mode="thread"`` runs it on a daemon
    thread of this process. ``ep.stream`` is the plan of what it serves
    (shards, lineage, sequence numbers, data); ``ep.stats()`` the server's
    counters and CPU seconds.
    """

    def __init__(
        self,
        shards: int = 4,
        records_per_shard: int = 100_000,
        size: int = 200,
        latency_s: float = 0.0,
        lineage: str = "flat",
        *,
        stream_name: str = STREAM,
        mode: str = "process",
        port: int = 0,
        start_timeout_s: float = 300.0,
    ) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"mode={mode!r}; expected 'process' or 'thread'")
        if latency_s < 0:
            raise ValueError(f"latency_s={latency_s} must be >= 0")
        self.now_ms = int(time.time() * 1000)  # the child process plans the same stream from the same clock
        self.stream = plan_stream(
            shards, records_per_shard, lineage, size=size, stream_name=stream_name, now_ms=self.now_ms
        )
        self.args = {"shards": shards, "records_per_shard": records_per_shard, "size": size, "lineage": lineage}
        self.latency_s = latency_s
        self.mode = mode
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.endpoint_url = ""
        self.pid = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def stream_name(self) -> str:
        return self.stream.name

    def __enter__(self) -> Self:
        if self.mode == "process":
            self._start_process()
        else:
            self._start_thread()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start_process(self) -> None:
        a = self.args
        cmd = [
            sys.executable, os.path.abspath(__file__), "serve", "--port", str(self.port),
            "--shards", str(a["shards"]), "--records-per-shard", str(a["records_per_shard"]),
            "--size", str(a["size"]), "--lineage", a["lineage"], "--latency-ms", repr(self.latency_s * 1000),
            "--stream-name", self.stream.name, "--now-ms", str(self.now_ms), "--ready-json",
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], self.start_timeout_s)
        line = self._proc.stdout.readline() if ready else b""
        if not line:
            self.stop()
            raise RuntimeError(f"replay endpoint did not start within {self.start_timeout_s} s: {' '.join(cmd)}")
        info = json.loads(line)
        self.endpoint_url, self.pid = info["endpoint_url"], info["pid"]

    def _start_thread(self) -> None:
        service = ReplayService(self.stream)
        started = threading.Event()
        failure: list[BaseException] = []

        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            replay = _Server(service, self.latency_s)
            try:
                server = await replay.start("127.0.0.1", self.port)
            except BaseException as exc:  # noqa: BLE001  (reported to the starting thread)
                failure.append(exc)
                started.set()
                return
            self.endpoint_url = _url(server)
            started.set()
            await replay.serve_until(server, self._stopped)

        self._thread = threading.Thread(target=lambda: asyncio.run(run()), name="replay-endpoint", daemon=True)
        self._thread.start()
        started.wait(self.start_timeout_s)
        if failure:
            raise failure[0]
        self.pid = os.getpid()

    def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe:
                    pipe.close()
        if self._thread is not None:
            loop, stopped = self._loop, self._stopped
            if loop is not None and stopped is not None and not loop.is_closed():
                loop.call_soon_threadsafe(stopped.set)
            self._thread.join(5)
            self._thread = None

    def stats(self) -> dict[str, Any]:
        """The server's counters: calls per operation, records, bytes, ``cpu_s`` (its process's CPU time)."""
        host, _, port = self.endpoint_url.removeprefix("http://").partition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", "/stats")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()


def _url(server: asyncio.AbstractServer) -> str:
    host, port = server.sockets[0].getsockname()[:2]
    return f"http://{host}:{port}"


# -- serve: the child process, or by hand ---------------------------------------------------------------


def serve(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    stream = plan_stream(
        args.shards, args.records_per_shard, args.lineage, size=args.size,
        stream_name=args.stream_name, now_ms=args.now_ms,
    )
    service = ReplayService(stream)
    built = time.perf_counter() - started

    async def run() -> None:
        replay = _Server(service, args.latency_ms / 1000)
        server = await replay.start(args.host, args.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        url = _url(server)
        if args.ready_json:
            print(json.dumps({"endpoint_url": url, "pid": os.getpid()}), flush=True)
        else:
            shard_word = f"{len(stream.shards)} shards ({args.lineage})"
            print(
                f"serving stream {stream.name!r}: {shard_word}, {stream.records:,} records of {args.size} B, "
                f"latency {args.latency_ms:g} ms, built in {built:.1f} s\n"
                f"export KINESIS_SRC_ENDPOINT_URL={url} AWS_REGION={REGION} "
                "AWS_ACCESS_KEY_ID=replay AWS_SECRET_ACCESS_KEY=replay\nCtrl-C stops",
                flush=True,
            )
        if args.ready_json:  # started by ReplayEndpoint: its stdin pipe closes when the parent goes away
            loop.add_reader(sys.stdin.fileno(), lambda: os.read(sys.stdin.fileno(), 4096) or stop.set())
        await replay.serve_until(server, stop)

    asyncio.run(run())


# -- measure: the endpoint's own capacity -----------------------------------------------------------------


def _raw_request(target: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    return (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.1\r\n"
        b"X-Amz-Target: Kinesis_20131202.%s\r\nContent-Length: %d\r\n\r\n%s" % (target.encode(), len(payload), payload)
    )


class RawClient:
    """A trivial keep-alive client: sends requests, reads Content-Length bodies, parses nothing it need not."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def call(self, target: str, body: dict[str, Any]) -> bytes | bytearray:
        """One request; the answer's body (raises RuntimeError with it on a non-200 answer)."""
        self.sock.sendall(_raw_request(target, body))
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the endpoint closed the connection")
            buf += chunk
        head = bytes(buf[:end]).lower()
        i = head.index(b"content-length:") + 15
        j = head.find(b"\r\n", i)
        length = int(head[i : j if j >= 0 else len(head)])
        del buf[: end + 4]
        if len(buf) >= length:  # small answers arrive with their head
            out: bytes | bytearray = bytes(buf[:length])
            del buf[:length]
        else:  # large ones are read straight into their own buffer
            out = bytearray(length)
            view = memoryview(out)
            have = len(buf)
            view[:have] = buf
            buf.clear()
            while have < length:
                got = self.sock.recv_into(view[have:])
                if not got:
                    raise ConnectionError("the endpoint closed the connection mid-answer")
                have += got
        if not head.startswith(b"http/1.1 200"):
            raise RuntimeError(bytes(out).decode(errors="replace"))
        return out

    def close(self) -> None:
        self.sock.close()


def _next_iterator(body: bytes | bytearray) -> str | None:
    i = body.rfind(b'"NextShardIterator":"')
    if i < 0:
        return None
    i += 21
    return body[i : body.index(b'"', i)].decode()


def _read_raw(url: str, stream: str, shard: str, limit: int, deadline: float) -> int:
    """GetRecords from TRIM_HORIZON to the tip, again and again until ``deadline``; returns calls made."""
    client = RawClient(url)
    calls = 0
    try:
        while time.perf_counter() < deadline:
            got = client.call("GetShardIterator", {"StreamName": stream, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"})
            iterator: str | None = json.loads(got)["ShardIterator"]
            while iterator and time.perf_counter() < deadline:
                body = client.call("GetRecords", {"ShardIterator": iterator, "Limit": limit})
                calls += 1
                if body.startswith(b'{"Records":[]'):
                    break
                iterator = _next_iterator(body)
    finally:
        client.close()
    return calls


def _read_boto3(url: str, stream: str, shards: list[str], limit: int, deadline: float) -> tuple[int, int]:
    """One boto3 client, GetRecords round-robin over the shards (botocore's own parser); (calls, records)."""
    import boto3  # only the measure command needs it

    client = boto3.client(
        "kinesis", region_name=REGION, endpoint_url=url,
        aws_access_key_id="replay", aws_secret_access_key="replay",
    )
    calls = records = 0
    iterators: dict[str, str | None] = {}
    while time.perf_counter() < deadline:
        for shard in shards:
            iterator = iterators.get(shard)
            if iterator is None:
                iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            out = client.get_records(ShardIterator=iterator, Limit=limit)
            calls += 1
            records += len(out["Records"])
            iterators[shard] = out.get("NextShardIterator") if out["Records"] else None
    return calls, records


def _read_kinesis_src(url: str, stream: str, shards: list[str], limit: int, deadline: float) -> None:
    """The same loop through kinesis-src's ``KinesisClient`` (its fast GetRecords parser), no pacing; imported here only."""
    from kinesis_src import AwsSettings, Position
    from kinesis_src.aws import KinesisClient

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "replay")  # dummy: botocore signs every request
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "replay")
    kinesis = KinesisClient(AwsSettings(region=REGION, endpoint_url=url))
    iterators: dict[str, str | None] = {}
    while time.perf_counter() < deadline:
        for shard in shards:
            iterator = iterators.get(shard) or kinesis.get_shard_iterator(stream, shard, Position.trim_horizon())
            page = kinesis.get_records(iterator, limit, shard, stream)
            iterators[shard] = page.next_iterator if len(page) else None


def measure(args: argparse.Namespace) -> None:
    """Records/s and server CPU per call for raw-socket, boto3 and kinesis-src clients, server in a child process."""
    print(
        f"replay endpoint capacity: {args.shards} shards x {args.records_per_shard:,} records of {args.size} B, "
        f"{args.seconds:g} s per row, server in its own process (pid CPU from /stats)"
    )
    header = f"{'client':<34} {'Limit':>6} {'conns':>5} {'calls/s':>9} {'records/s':>11} {'srv CPU%':>8} {'srv us/call':>11} {'srv ns/rec':>10} {'cli CPU%':>8}"
    print(header)
    with ReplayEndpoint(args.shards, args.records_per_shard, args.size, 0.0, "flat") as ep:
        shard_ids = [s.shard_id for s in ep.stream.shards]
        rows: list[tuple[str, int, int, Callable[[float], None]]] = []
        for limit in args.limits:
            def raw(deadline: float, limit: int = limit) -> None:
                threads = [
                    threading.Thread(target=_read_raw, args=(ep.endpoint_url, ep.stream_name, s, limit, deadline))
                    for s in shard_ids
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            rows.append(("raw socket, 1 thread per shard", limit, len(shard_ids), raw))
        if not args.no_boto3:
            def boto(deadline: float) -> None:
                _read_boto3(ep.endpoint_url, ep.stream_name, shard_ids, MAX_LIMIT, deadline)
            rows.append(("boto3 loop (botocore parser)", MAX_LIMIT, 1, boto))
        if not args.no_kinesis_src:
            def fast(deadline: float) -> None:
                _read_kinesis_src(ep.endpoint_url, ep.stream_name, shard_ids, MAX_LIMIT, deadline)
            rows.append(("kinesis-src KinesisClient loop", MAX_LIMIT, 1, fast))
        for name, limit, conns, run in rows:
            before = ep.stats()
            cpu0, t0 = time.process_time(), time.perf_counter()
            run(t0 + args.seconds)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            after = ep.stats()
            calls = max(1, sum(after["calls"].values()) - sum(before["calls"].values()))
            records = after["records"] - before["records"]
            server_cpu = after["cpu_s"] - before["cpu_s"]
            print(
                f"{name:<34} {limit:>6} {conns:>5} {calls / wall:>9,.0f} {records / wall:>11,.0f} "
                f"{100 * server_cpu / wall:>7.0f}% {1e6 * server_cpu / calls:>11.0f} "
                f"{1e9 * server_cpu / max(records, 1):>10.0f} {100 * cpu / wall:>7.0f}%"
            )
        stats = ep.stats()
        print(
            f"pre-encoding {ep.stream.records:,} records took {stats['build_s']:.1f} s; "
            f"server CPU {stats['cpu_s']:.1f} s in all (pid {ep.pid})"
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "measure"):
        p = sub.add_parser(name)
        p.add_argument("--shards", type=int, default=4)
        p.add_argument("--records-per-shard", type=int, default=100_000)
        p.add_argument("--size", type=int, default=200, help="bytes of data per record")
    serve_p = sub.choices["serve"]
    serve_p.add_argument("--lineage", choices=LINEAGES, default="flat")
    serve_p.add_argument("--latency-ms", type=float, default=0.0, help="fixed delay added to every call")
    serve_p.add_argument("--stream-name", default=STREAM)
    serve_p.add_argument("--host", default="127.0.0.1")
    serve_p.add_argument("--port", type=int, default=0, help="0: a free port")
    serve_p.add_argument("--now-ms", type=int, default=None, help=argparse.SUPPRESS)
    serve_p.add_argument("--ready-json", action="store_true", help=argparse.SUPPRESS)
    measure_p = sub.choices["measure"]
    measure_p.add_argument("--seconds", type=float, default=3.0, help="per row")
    measure_p.add_argument("--limits", type=int, nargs="+", default=[10_000, 1_000, 100, 1])
    measure_p.add_argument("--no-boto3", action="store_true")
    measure_p.add_argument("--no-kinesis-src", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        serve(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
