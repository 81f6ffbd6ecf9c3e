"""A counting HTTP proxy in front of DynamoDB Local: how many DynamoDB requests a peer makes, and their capacity.

Forwards every request (HTTP/1.1 keep-alive, one upstream connection per
client connection) and records ``(time, operation, capacity units)`` from
the ``X-Amz-Target`` header and the answer. To learn the capacity it asks
for it: a JSON request of an operation that takes ``ReturnConsumedCapacity``
and does not set it gets ``"TOTAL"`` added (DynamoDB Local checks no
signatures); the answer goes back unchanged (its CRC32 header stays true),
so the client sees one more field it did not ask for. Runs on a thread of
the harness; loopback only.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
CAPACITY_OPERATIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                       "BatchWriteItem", "TransactGetItems", "TransactWriteItems"}


def with_capacity_asked(operation: str, body: bytes) -> bytes:
    """The request body with ``ReturnConsumedCapacity: TOTAL`` where the operation takes it and it is unset."""
    if operation not in CAPACITY_OPERATIONS:
        return body
    try:
        request = json.loads(body)
    except ValueError:
        return body
    if not isinstance(request, dict) or request.get("ReturnConsumedCapacity") not in (None, "NONE"):
        return body
    request["ReturnConsumedCapacity"] = "TOTAL"
    return json.dumps(request).encode()


def capacity_units(answer: bytes) -> float:
    """The capacity units an answer reports (summed over tables for batch and transaction answers)."""
    try:
        document = json.loads(answer)
    except ValueError:
        return 0.0
    consumed = document.get("ConsumedCapacity") if isinstance(document, dict) else None
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    return float(sum(float(e.get("CapacityUnits") or 0) for e in entries if isinstance(e, dict)))


class CountingProxy:
    """``with CountingProxy(upstream) as proxy``: ``proxy.url`` to use, ``proxy.count(since, until)``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.calls: list[tuple[float, str]] = []
        self.capacity: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, since: float, until: float) -> dict[str, int]:
        """Requests per operation made in [since, until) (epoch seconds)."""
        out: dict[str, int] = {}
        with self._lock:
            for at, op in self.calls:
                if since <= at < until:
                    out[op] = out.get(op, 0) + 1
        return out

    def capacity_units(self, since: float, until: float) -> float:
        """Capacity units the answers in [since, until) reported (epoch seconds)."""
        with self._lock:
            return sum(units for at, units in self.capacity if since <= at < until)

    def _record(self, operation: str) -> None:
        with self._lock:
            self.calls.append((time.time(), operation))

    def _record_capacity(self, units: float) -> None:
        with self._lock:
            self.capacity.append((time.time(), units))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            upstream_conn: http.client.HTTPConnection | None = None

            def log_message(self, *_args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self._forward()

            def do_GET(self) -> None:  # noqa: N802
                self._forward()

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                target = self.headers.get("X-Amz-Target", "no X-Amz-Target")
                operation = target.rsplit(".", 1)[-1]
                proxy._record(operation)
                body = with_capacity_asked(operation, body)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_HEADERS and k.lower() != "content-length"}
                headers["Content-Length"] = str(len(body))
                if self.upstream_conn is None:
                    self.upstream_conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    self.upstream_conn.request(self.command, self.path, body, headers)
                    response = self.upstream_conn.getresponse()
                    data = response.read()
                    proxy._record_capacity(capacity_units(data))
                except (OSError, http.client.HTTPException):
                    self.upstream_conn.close()
                    self.upstream_conn = None
                    self.send_error(502)
                    return
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
