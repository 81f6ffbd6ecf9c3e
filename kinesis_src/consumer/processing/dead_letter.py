"""Where a record goes when it will never be processed: a Kinesis stream, or a callable of yours.

A dead-lettered record counts as done, so a poison record stops travelling from worker to worker. A
stream gets one JSON envelope per record, with the record's partition key (docs/processing.md)."""

from __future__ import annotations

import asyncio
import base64
import enum
import inspect
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ...errors import ConfigurationError, StreamNotFoundError
from ...records import Record

if TYPE_CHECKING:
    from ...aws.async_kinesis import AsyncKinesisClient

ENVELOPE_VERSION = 1


class DeadLetterReason(str, enum.Enum):
    REJECTED = "rejected"
    FAILED = "failed"
    RELEASED = "released"
    OWNER_SWITCHES = "owner_switches"


@dataclass(frozen=True)
class DeadLetter:
    """One record given up on, with where it came from and why."""

    record: Record
    delivery_count: int
    reason: DeadLetterReason
    error_type: str
    error_message: str
    application: str
    worker_id: str
    at: datetime

    def envelope(self) -> dict[str, Any]:
        r = self.record
        arrival = r.approximate_arrival_timestamp
        return {
            "version": ENVELOPE_VERSION,
            "stream": r.stream,
            "shard_id": r.shard_id,
            "sequence_number": r.sequence_number,
            "sub_sequence_number": r.sub_sequence_number,
            "partition_key": r.partition_key,
            "explicit_hash_key": r.explicit_hash_key,
            "approximate_arrival_timestamp": arrival.isoformat() if arrival else None,
            "data": base64.b64encode(r.data).decode("ascii"),
            "delivery_count": self.delivery_count,
            "outcome": self.reason.value,
            "error": {"type": self.error_type, "message": self.error_message},
            "application": self.application,
            "worker_id": self.worker_id,
            "dead_lettered_at": self.at.isoformat(),
        }

    def to_json(self) -> bytes:
        return json.dumps(self.envelope(), separators=(",", ":")).encode()


def error_parts(error: BaseException | None, fallback: str) -> tuple[str, str]:
    if error is None:
        return "", fallback
    return type(error).__name__, str(error)[:4000] or fallback


DeadLetterCallable = Callable[[DeadLetter], Awaitable[None] | None]


class DeadLetterSink:
    """Sends dead letters somewhere; ``send`` raises if they could not be kept (the record then stays undone)."""

    async def send(self, letter: DeadLetter) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class StreamDeadLetter(DeadLetterSink):
    """Puts each dead letter's JSON envelope on a Kinesis stream (PutRecord, the client's retries)."""

    def __init__(self, kinesis: AsyncKinesisClient, stream: str) -> None:
        self.kinesis = kinesis  # the consumer's own, open
        self.stream = stream

    async def send(self, letter: DeadLetter) -> None:
        await self.kinesis.put_record(self.stream, letter.record.partition_key or "-", letter.to_json())

    def describe(self) -> str:
        return f"stream {self.stream!r}"


class CallableDeadLetter(DeadLetterSink):
    """Calls your function (sync: on a thread; or async) with each :class:`DeadLetter`."""

    def __init__(self, fn: DeadLetterCallable) -> None:
        self.fn = fn

    async def send(self, letter: DeadLetter) -> None:
        if inspect.iscoroutinefunction(self.fn):
            await self.fn(letter)
            return
        result = await asyncio.to_thread(self.fn, letter)
        if inspect.isawaitable(result):
            await result

    def describe(self) -> str:
        return f"callable {getattr(self.fn, '__qualname__', repr(self.fn))}"


async def open_dead_letter(dead_letter: str | DeadLetterCallable | None, kinesis: AsyncKinesisClient | None,
                           ) -> DeadLetterSink | None:
    """The sink for the ``dead_letter`` option; a stream must exist (checked here, before anything is read):
    written with ``kinesis``, the consumer's open client."""
    if dead_letter is None:
        return None
    if callable(dead_letter):
        return CallableDeadLetter(dead_letter)
    if not isinstance(dead_letter, str) or not dead_letter:
        raise ConfigurationError(
            f"dead_letter must be a Kinesis stream name, a callable taking a DeadLetter, or None; got {dead_letter!r}"
        )
    if kinesis is None:
        raise not_started()
    try:
        await kinesis.describe_stream(dead_letter)
    except StreamNotFoundError as exc:
        raise ConfigurationError(
            f"dead_letter stream {dead_letter!r} does not exist at {kinesis.endpoint}: create it first "
            "(one shard is enough for a trickle of dead letters), or pass another dead_letter"
        ) from exc
    return StreamDeadLetter(kinesis, dead_letter)


def not_started() -> ConfigurationError:
    """process() before the consumer started: it writes with the consumer's open clients."""
    return ConfigurationError("process() runs inside `async with Consumer(...) as consumer:`, once it started")


def now_utc() -> datetime:
    return datetime.now(UTC)
