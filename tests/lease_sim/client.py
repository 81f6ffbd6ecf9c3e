"""The wire between a worker's real DynamoDBClient and the simulated table: latency, one request at a time.

:class:`SimBotocoreClient` stands where botocore's client stands inside
:class:`kinesis_src.aws.dynamodb.DynamoDBClient` (handed over through the
``session`` argument, so nothing in kinesis_src is patched for it). Each call
suspends the calling worker's fiber with a :class:`Request`; the
:class:`Network` applies it to the table after half a round trip and
resumes the fiber with the answer after the other half. Other workers'
requests interleave in between, as they would on the wire.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Mapping

from botocore.exceptions import ClientError

from .dynamodb import SimDynamoDB
from .events import EventQueue


@dataclass(frozen=True)
class Request:
    method: str  # botocore's method name, e.g. "update_item"
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Sleep:
    until: float  # simulated time


@dataclass(frozen=True)
class Raise:
    error: BaseException


_OPERATIONS = {
    "get_item": "GetItem", "put_item": "PutItem", "update_item": "UpdateItem", "delete_item": "DeleteItem",
    "query": "Query", "transact_write_items": "TransactWriteItems", "batch_write_item": "BatchWriteItem",
}


class _Events:
    """botocore's event hooks, as far as DynamoDBClient uses them (the request counter)."""

    def __init__(self) -> None:
        self.handlers: dict[str, list[Callable[..., Any]]] = {}

    def register(self, name: str, handler: Callable[..., Any]) -> None:
        self.handlers.setdefault(name, []).append(handler)

    def emit_before_call(self, operation: str) -> None:
        for handler in self.handlers.get("before-call.dynamodb", ()):
            handler(event_name=f"before-call.dynamodb.{operation}")


class SimBotocoreClient:
    """A botocore DynamoDB client whose every call is a simulated round trip."""

    def __init__(self, suspend: Callable[[Any], Any]) -> None:
        self._suspend = suspend
        self.meta = SimpleNamespace(events=_Events())

    def __getattr__(self, method: str) -> Callable[..., dict[str, Any]]:
        if method not in _OPERATIONS:
            raise AttributeError(f"the simulated DynamoDB has no {method}")

        def call(**body: Any) -> dict[str, Any]:
            self.meta.events.emit_before_call(_OPERATIONS[method])
            answer = self._suspend(Request(method, body))
            if isinstance(answer, Raise):
                raise answer.error
            return answer

        return call


class SimSession:
    """Passed as DynamoDBClient(session=...): its create_client returns the simulated client."""

    def __init__(self, client: SimBotocoreClient) -> None:
        self.client = client

    def create_client(self, service: str, **_: Any) -> SimBotocoreClient:
        assert service == "dynamodb", service
        return self.client


class Network:
    """Delivers requests to the table and answers back, each way half of a jittered round trip.

    ``latency_s`` is the (low, high) range of one round trip; a Query page
    adds its bytes at ``bandwidth_bps`` (a 1 MB page is not as fast as a
    100-byte GetItem).
    """

    def __init__(self, queue: EventQueue, table: SimDynamoDB, rng: random.Random,
                 latency_s: tuple[float, float] = (0.005, 0.010), bandwidth_bps: float = 100e6) -> None:
        self.queue = queue
        self.table = table
        self.rng = rng
        self.latency_s = latency_s
        self.bandwidth_bps = bandwidth_bps
        self.in_flight = 0

    def send(self, resume: Callable[[Any], None], request: Request) -> None:
        """Serve ``request`` after half a round trip; ``resume`` gets the answer after the other half."""
        self.in_flight += 1
        self.queue.after(self._half(), lambda: self._serve(resume, request))

    def _serve(self, resume: Callable[[Any], None], request: Request) -> None:
        transfer = 0.0
        try:
            answer: Any = self.table.execute(request.method, request.body)
            if request.method == "query":
                transfer = self.table.last_page_bytes / self.bandwidth_bps
        except ClientError as exc:
            answer = Raise(exc)
        self.queue.after(self._half() + transfer, lambda: self._answer(resume, answer))

    def _answer(self, resume: Callable[[Any], None], answer: Any) -> None:
        self.in_flight -= 1
        resume(answer)

    def _half(self) -> float:
        low, high = self.latency_s
        return self.rng.uniform(low, high) / 2
