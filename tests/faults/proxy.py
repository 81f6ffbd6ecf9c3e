"""A fault-injecting HTTP/1.1 proxy that sits between kinesis-src and one emulator.

One :class:`FaultProxy` per upstream (kinesis-mock, DynamoDB Local), bound to
127.0.0.1 on a free port. Clients reach it through the usual settings
(``KINESIS_SRC_ENDPOINT_URL`` / ``KINESIS_SRC_DYNAMODB_ENDPOINT_URL``), so every
AWS call of the product -- driver, Spark executors, consumer workers -- passes
through it. Requests are matched on their ``X-Amz-Target`` header
(``Kinesis_20131202.GetRecords``, ``DynamoDB_20120810.UpdateItem``, ...).

The plan (:class:`FaultPlan`) can be changed while traffic flows; it is
guarded by one lock. A :class:`Fault` says *what* (an AWS JSON error, a
5xx, a reset in the middle of the body, a truncated body, latency, a lost
response) and *when*: with a probability, for the next N matching calls,
for a burst of T seconds from the moment it is added, or any combination
(all given conditions must hold; a count still bounds the injections).
Counters record every request seen per target and every injection per
fault, so a scenario can prove that its faults actually fired.

Stdlib only; threads, one per client connection, each with its own
persistent upstream connection.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

# -- what a fault does ---------------------------------------------------------------------------

ERROR = "error"            # answer with an AWS JSON error, never forwarded
RESET = "reset"            # forward; send the status, headers and part of the body, then RST
TRUNCATE = "truncate"      # forward; announce the full Content-Length, send part of the body, then FIN
LATENCY = "latency"        # wait, then forward normally
LOST_RESPONSE = "lost"     # forward (the write lands), then RST instead of answering
KINDS = (ERROR, RESET, TRUNCATE, LATENCY, LOST_RESPONSE)

KINESIS = "Kinesis_20131202."
DYNAMODB = "DynamoDB_20120810."


@dataclass
class Fault:
    """One rule of the plan. ``targets`` match X-Amz-Target exactly, or by prefix when ending in '.' or '*'."""

    name: str
    kind: str
    targets: tuple[str, ...]
    probability: float = 1.0
    count: int | None = None          # at most this many injections ("next N calls" with probability 1)
    duration_s: float | None = None   # only during [added, added + duration_s) ("burst for T seconds")
    delay_s: float = 0.0              # LATENCY
    status: int = 400                 # ERROR
    code: str = ""                    # ERROR: the __type / x-amzn-ErrorType
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # ERROR: more JSON fields (CancellationReasons)
    fraction: float = 0.5             # RESET/TRUNCATE: share of the body sent before breaking off
    body_contains: bytes | None = None  # only requests whose body contains this
    shard: str | None = None          # only GetShardIterator/GetRecords of this shard (iterators are tracked)
    injected: int = 0
    added_at: float = 0.0
    first_at: float | None = None
    last_at: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {KINDS}")
        self.targets = tuple(self.targets)

    def matches(self, target: str) -> bool:
        for pattern in self.targets:
            if pattern.endswith("*"):
                if target.startswith(pattern[:-1]):
                    return True
            elif pattern.endswith("."):
                if target.startswith(pattern):
                    return True
            elif target == pattern:
                return True
        return False

    def active(self, now: float) -> bool:
        if self.count is not None and self.injected >= self.count:
            return False
        if self.duration_s is not None and now >= self.added_at + self.duration_s:
            return False
        return True

    @property
    def ended_at(self) -> float | None:
        """When the burst ended (monotonic), else the last injection."""
        if self.duration_s is not None:
            return self.added_at + self.duration_s
        return self.last_at


class FaultPlan:
    """The faults a proxy applies; safe to change from any thread while requests flow."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._random = random.Random(seed)
        self.requests: Counter[str] = Counter()   # every request seen, per target
        self.injections: Counter[tuple[str, str]] = Counter()  # (fault name, target)
        self.history: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            fault.added_at = time.monotonic()
            self._faults.append(fault)
            self.history.append(fault)
        return fault

    def remove(self, name: str) -> None:
        with self._lock:
            self._faults = [f for f in self._faults if f.name != name]

    def clear(self) -> None:
        with self._lock:
            self._faults = []

    def choose(self, target: str, body: bytes = b"", shard: str | None = None) -> Fault | None:
        """Count the request; the first active matching fault that fires (its injection counted), or None."""
        now = time.monotonic()
        with self._lock:
            self.requests[target] += 1
            for fault in self._faults:
                if not fault.matches(target) or not fault.active(now):
                    continue
                if fault.body_contains is not None and fault.body_contains not in body:
                    continue
                if fault.shard is not None and fault.shard != shard:
                    continue
                if fault.probability < 1.0 and self._random.random() >= fault.probability:
                    continue
                fault.injected += 1
                fault.first_at = fault.first_at or now
                fault.last_at = now
                self.injections[(fault.name, target)] += 1
                return fault
        return None

    def injected(self, name: str | None = None) -> int:
        with self._lock:
            return sum(n for (f, _), n in self.injections.items() if name is None or f == name)

    def summary(self) -> dict[str, int]:
        with self._lock:
            out: Counter[str] = Counter()
            for (name, _), n in self.injections.items():
                out[name] += n
            return dict(out)


# -- fault constructors ----------------------------------------------------------------------------


def aws_error(name: str, targets: Iterable[str], code: str, status: int = 400, message: str = "",
              extra: dict[str, Any] | None = None, **when: Any) -> Fault:
    return Fault(name, ERROR, tuple(targets), status=status, code=code,
                 message=message or f"injected {code}", extra=dict(extra or {}), **when)


def transaction_canceled(name: str, reason: str, actions: int = 1, **when: Any) -> Fault:
    """TransactionCanceledException with one CancellationReason per action (DynamoDB's shape)."""
    reasons = [{"Code": reason, "Message": f"injected {reason}"}] + [{"Code": "None"}] * (actions - 1)
    return aws_error(name, [DYNAMODB + "TransactWriteItems"], "TransactionCanceledException",
                     message=f"Transaction cancelled, please refer cancellation reasons for specific reasons [{reason}]",
                     extra={"CancellationReasons": reasons}, **when)


# -- the proxy ----------------------------------------------------------------------------------------

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


class _ClientClosed(Exception):
    pass


class FaultProxy:
    """Threaded HTTP/1.1 forwarder 127.0.0.1:<port> -> upstream, applying ``plan``."""

    def __init__(self, upstream_url: str, plan: FaultPlan | None = None, name: str = "proxy") -> None:
        rest = upstream_url.split("://", 1)[-1].rstrip("/")
        host, _, port = rest.partition(":")
        self.upstream = (host, int(port or 80))
        self.plan = plan or FaultPlan()
        self.name = name
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self.port = 0
        self._iterators: dict[str, str] = {}  # shard iterator -> shard id, learnt from the answers
        self._iterators_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.close()
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connections --------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._conns_lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name=f"{self.name}-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: http.client.HTTPConnection | None = None
        reader = conn.makefile("rb")
        try:
            while not self._closing.is_set():
                try:
                    request = _read_request(reader)
                except _ClientClosed:
                    return
                method, path, headers, body = request
                target = next((v for k, v in headers if k.lower() == "x-amz-target"), "")
                shard = self._shard_of(target, body)
                fault = self.plan.choose(target, body, shard)
                if fault is not None and fault.kind == ERROR:
                    _send(conn, *_error_response(fault))
                    continue
                if fault is not None and fault.kind == LATENCY:
                    if self._closing.wait(fault.delay_s):
                        return
                if upstream is None:
                    upstream = http.client.HTTPConnection(*self.upstream, timeout=120)
                try:
                    status, reason, out_headers, out_body = _forward(upstream, method, path, headers, body)
                except (OSError, http.client.HTTPException):
                    upstream.close()
                    upstream = None
                    _reset(conn)
                    return
                if shard is not None and status == 200:
                    self._learn(target, shard, out_body)
                if fault is not None and fault.kind == LOST_RESPONSE:
                    _reset(conn)
                    return
                if fault is not None and fault.kind in (RESET, TRUNCATE):
                    cut = max(1, int(len(out_body) * fault.fraction)) if out_body else 0
                    head = _head(status, reason, out_headers, len(out_body))
                    try:
                        conn.sendall(head + out_body[:cut])
                    except OSError:
                        return
                    if fault.kind == RESET:
                        _reset(conn)
                    else:
                        try:
                            conn.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                    return
                if not _send(conn, status, reason, out_headers, out_body):
                    return
        finally:
            if upstream is not None:
                upstream.close()
            with self._conns_lock:
                self._conns.discard(conn)
            try:
                reader.close()
                conn.close()
            except OSError:
                pass

    def _shard_of(self, target: str, body: bytes) -> str | None:
        if target not in (KINESIS + "GetShardIterator", KINESIS + "GetRecords"):
            return None
        try:
            request = json.loads(body)
        except ValueError:
            return None
        if "ShardId" in request:
            return str(request["ShardId"])
        with self._iterators_lock:
            return self._iterators.get(str(request.get("ShardIterator")))

    def _learn(self, target: str, shard: str, body: bytes) -> None:
        try:
            answer = json.loads(body)
        except ValueError:
            return
        iterator = answer.get("ShardIterator") or answer.get("NextShardIterator")
        if iterator:
            with self._iterators_lock:
                if len(self._iterators) > 100_000:
                    self._iterators.clear()
                self._iterators[iterator] = shard


def _read_request(reader: Any) -> tuple[str, str, list[tuple[str, str]], bytes]:
    try:
        line = reader.readline(65537)
    except OSError:
        raise _ClientClosed() from None
    if not line:
        raise _ClientClosed()
    while line in (b"\r\n", b"\n"):
        line = reader.readline(65537)
        if not line:
            raise _ClientClosed()
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) < 3:
        raise _ClientClosed()
    method, path = parts[0], parts[1]
    headers: list[tuple[str, str]] = []
    while True:
        h = reader.readline(65537)
        if not h:
            raise _ClientClosed()
        if h in (b"\r\n", b"\n"):
            break
        key, _, value = h.decode("latin-1").partition(":")
        headers.append((key.strip(), value.strip()))
    lowered = {k.lower(): v for k, v in headers}
    if lowered.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(reader.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while reader.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(reader.read(size))
            reader.readline()
        body = b"".join(chunks)
    else:
        length = int(lowered.get("content-length", "0") or 0)
        body = reader.read(length) if length else b""
        if len(body) < length:
            raise _ClientClosed()
    if lowered.get("expect", "").lower() == "100-continue":
        pass  # botocore/aiohttp do not send it for these JSON APIs
    return method, path, headers, body


def _forward(upstream: http.client.HTTPConnection, method: str, path: str,
             headers: list[tuple[str, str]], body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
    send = [(k, v) for k, v in headers if k.lower() not in _HOP_HEADERS and k.lower() != "expect"]
    for attempt in (1, 2):  # a kept-alive upstream connection may have been closed by the server meanwhile
        try:
            upstream.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in send:
                upstream.putheader(k, v)
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            data = response.read()
            out = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS]
            if response.will_close:
                upstream.close()
            return response.status, response.reason, out, data
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            upstream.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _head(status: int, reason: str, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    lines += [f"Content-Length: {length}", "Connection: keep-alive", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _send(conn: socket.socket, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> bool:
    try:
        conn.sendall(_head(status, reason, headers, len(body)) + body)
        return True
    except OSError:
        return False


def _reset(conn: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a crashed middlebox or server would."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    except OSError:
        pass


_REASONS = {400: "Bad Request", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def _error_response(fault: Fault) -> tuple[int, str, list[tuple[str, str]], bytes]:
    body: dict[str, Any]
    prefix = "com.amazonaws.dynamodb.v20120810#" if any(t.startswith("DynamoDB") for t in fault.targets) else ""
    if fault.code:
        body = {"__type": prefix + fault.code, "message": fault.message, **fault.extra}
    else:
        body = {"message": fault.message or "injected"}
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", "fault-proxy")]
    if fault.code:
        headers.append(("x-amzn-ErrorType", fault.code))
    return fault.status, _REASONS.get(fault.status, "Error"), headers, data


# -- both proxies for a launcher.Emulators -----------------------------------------------------------------


class ProxyPair:
    """A proxy in front of each emulator; ``env()`` is the emulators' env with the proxies as endpoints."""

    def __init__(self, emulator_env: dict[str, str], seed: int | None = None) -> None:
        self.direct = dict(emulator_env)
        self.kinesis = FaultProxy(emulator_env["KINESIS_SRC_ENDPOINT_URL"], FaultPlan(seed), "kinesis-proxy")
        self.dynamodb = FaultProxy(emulator_env["KINESIS_SRC_DYNAMODB_ENDPOINT_URL"], FaultPlan(seed), "dynamodb-proxy")

    def start(self) -> ProxyPair:
        self.kinesis.start()
        try:
            self.dynamodb.start()
        except BaseException:
            self.kinesis.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            self.kinesis.stop()
        finally:
            self.dynamodb.stop()

    def __enter__(self) -> ProxyPair:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        return {**self.direct, "KINESIS_SRC_ENDPOINT_URL": self.kinesis.url,
                "KINESIS_SRC_DYNAMODB_ENDPOINT_URL": self.dynamodb.url}

    def plan_for(self, target_prefix: str) -> FaultPlan:
        return self.dynamodb.plan if target_prefix.startswith("DynamoDB") else self.kinesis.plan

    def add(self, fault: Fault) -> Fault:
        return self.plan_for(fault.targets[0]).add(fault)

    def clear(self) -> None:
        self.kinesis.plan.clear()
        self.dynamodb.plan.clear()

    def injections(self) -> dict[str, int]:
        return {**self.kinesis.plan.summary(), **self.dynamodb.plan.summary()}
