"""A Kinesis endpoint on a raw socket with canned answers, for the read path through real botocore/aiobotocore.

``ScriptedEndpoint(records)`` answers GetRecords with ``records`` on one
page (with "end": the closed shard's last page, ``ChildShards``), ListShards,
GetShardIterator and DescribeStreamSummary with one shard, and
SubscribeToShard with an event stream of the same records (initial
response, two record events, an event type botocore's model does not know,
the shard's end). ``script[operation]`` lists what the next requests of an
operation get before "ok": "truncate" (the full Content-Length, half the
body, then the connection closes), "garbage" (a whole 200 body that is not
JSON, with ``SECRET`` in it), "malformed" (a GetRecords body whose record's Data is not base64),
"error:<code>:<status>" (an AWS JSON error answer), or for
SubscribeToShard "error:<code>" (an exception message after the first event).
``seen`` keeps every request's operation, path and (lower-cased) headers.
:class:`Endpoints` makes them for one test (``start(**script)``: an
endpoint and client settings pointing at it) and closes them together.
"""

from __future__ import annotations

import binascii
import json
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from kinesis_src.config import AwsSettings
from kinesis_src.retry import RetryPolicy

SHARD = "shardId-000000000000"
CHILD = "shardId-000000000001"
ARRIVAL = 1_795_444_866.572
JSON = "application/x-amz-json-1.1"
SECRET = "CANARY-s3cret-payload"  # in a garbage body and a record's Data that is not base64: errors must not show it
CHILD_SHARDS = [{"ShardId": CHILD, "ParentShards": [SHARD],
                 "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(2**128 - 1)}}]


@dataclass(frozen=True)
class Record:
    """One record as the endpoint serves it."""

    sequence_number: str
    partition_key: str
    data: bytes
    encryption: str | None = None

    def as_json(self, index: int) -> dict[str, Any]:
        out: dict[str, Any] = {"SequenceNumber": self.sequence_number, "ApproximateArrivalTimestamp": ARRIVAL + index,
                               "Data": binascii.b2a_base64(self.data, newline=False).decode(),
                               "PartitionKey": self.partition_key}
        if self.encryption:
            out["EncryptionType"] = self.encryption
        return out


def records(n: int) -> list[Record]:
    """``n`` records of varied keys, sizes (empty included) and encryption."""
    keys = ["α", "b", "ключ", "k-3"]
    return [Record(f"{49_600_000_000_000_000_000 + i}", keys[i % 4], f"v{i}".encode() * (i % 5),
                   "KMS" if i % 3 == 0 else None) for i in range(n)]


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths + CRC), headers, payload, message CRC."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", binascii.crc32(body))


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    return message({":message-type": "event", ":event-type": event_type, ":content-type": "application/json"},
                   json.dumps(payload).encode())


def exception(code: str, text: str) -> bytes:
    return message({":message-type": "exception", ":exception-type": code, ":content-type": "application/json"},
                   json.dumps({"message": text}).encode())


class ScriptedEndpoint:
    """The endpoint (see the module docstring); ``url`` to point a client at, ``requests`` counted per operation."""

    def __init__(self, served: list[Record], script: dict[str, list[str]] | None = None) -> None:
        self.served = served
        self.script = dict(script or {})
        self.requests: dict[str, int] = {}
        self.seen: list[dict[str, str]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while True:
                request = _read_request(reader)
                if request is None:
                    return
                path, headers = request
                operation = headers.get("x-amz-target", "").rpartition(".")[2]
                self.requests[operation] = self.requests.get(operation, 0) + 1
                self.seen.append({**headers, "operation": operation, "path": path})
                actions = self.script.get(operation, [])
                action = actions.pop(0) if actions else "ok"
                status, content_type, body = self._answer(operation, action)
                head = (b"HTTP/1.1 %d Answer\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                        % (status, content_type.encode(), len(body)))
                if action == "truncate":
                    conn.sendall(head + body[: len(body) // 2])
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                conn.sendall(head + body)

    def _answer(self, operation: str, action: str) -> tuple[int, str, bytes]:
        if operation == "SubscribeToShard":
            return 200, "application/vnd.amazon.eventstream", self._events(action)
        if action == "garbage":
            return 200, JSON, b"<html>Service Unavailable: " + SECRET.encode() + b"</html>"
        if action == "malformed":
            return 200, JSON, json.dumps({"Records": [{"SequenceNumber": "1", "Data": SECRET}]}).encode()
        if action.startswith("error:"):
            _, code, status = action.split(":")
            return int(status), JSON, json.dumps({"__type": code, "message": "scripted"}).encode()
        return 200, JSON, json.dumps(self._json(operation, ended=action == "end")).encode()

    def _json(self, operation: str, ended: bool) -> dict[str, Any]:
        if operation == "GetRecords":
            page = {"Records": [r.as_json(i) for i, r in enumerate(self.served)], "MillisBehindLatest": 7}
            return {**page, "ChildShards": CHILD_SHARDS} if ended else {**page, "NextShardIterator": "it-2"}
        if operation == "ListShards":
            return {"Shards": [{"ShardId": SHARD, "HashKeyRange": {"StartingHashKey": "0",
                                                                   "EndingHashKey": str(2**128 - 1)},
                                "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}
        if operation == "GetShardIterator":
            return {"ShardIterator": "it-1"}
        return {"StreamDescriptionSummary": {
            "StreamName": "orders", "StreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/orders",
            "StreamStatus": "ACTIVE", "OpenShardCount": 1, "RetentionPeriodHours": 24,
            "StreamCreationTimestamp": ARRIVAL}}

    def _events(self, action: str) -> bytes:
        half = len(self.served) // 2
        first = [r.as_json(i) for i, r in enumerate(self.served[:half])]
        rest = [r.as_json(half + i) for i, r in enumerate(self.served[half:])]
        wire = event("initial-response", {}) + event("SubscribeToShardEvent", {
            "Records": first, "ContinuationSequenceNumber": self.served[half - 1].sequence_number,
            "MillisBehindLatest": 5})
        if action.startswith("error:"):
            return wire + exception(action.partition(":")[2], "the stream broke")
        return wire + event("SomeFutureEvent", {"x": 1}) + event("SubscribeToShardEvent", {
            "Records": rest, "MillisBehindLatest": 0, "ChildShards": CHILD_SHARDS})


class Endpoints:
    """The scripted endpoints of one test, all serving ``served``; clients retry by ``retry``."""

    def __init__(self, served: list[Record], retry: RetryPolicy) -> None:
        self.served, self.retry = served, retry
        self.made: list[ScriptedEndpoint] = []

    def start(self, **script: list[str]) -> tuple[ScriptedEndpoint, AwsSettings]:
        """One more endpoint answering by ``script``, and settings for a client of it (us-east-1)."""
        endpoint = ScriptedEndpoint(self.served, script)
        self.made.append(endpoint)
        return endpoint, AwsSettings(region="us-east-1", endpoint_url=endpoint.url, retry=self.retry)

    def close(self) -> None:
        for endpoint in self.made:
            endpoint.close()


def _read_request(reader: Any) -> tuple[str, dict[str, str]] | None:
    """One request's target path and headers (lower-cased keys), its body read and dropped; None when the
    client closed."""
    request_line = reader.readline()
    if not request_line:
        return None
    headers: dict[str, str] = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode().partition(":")
        headers[key.strip().lower()] = value.strip()
    reader.read(int(headers.get("content-length", 0)))
    parts = request_line.decode().split()
    return (parts[1] if len(parts) > 1 else ""), headers
