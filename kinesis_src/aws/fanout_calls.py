"""The consumer calls' logic once, for botocore and aiobotocore alike: plans and their two drivers.

A plan yields the :class:`Call` it needs next and is sent its answer (or thrown its error);
:func:`drive` makes the calls blocking, :func:`adrive` awaited."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generator, TypeVar

from botocore.exceptions import ClientError

from .fanout_errors import error_code, limit_or_rate, not_active_yet, wait_timeout
from .fanout_model import ConsumerDescription, consumer_from

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One client call a plan asks for: the botocore operation's method name and its arguments."""

    operation: str
    args: dict[str, Any]

    def on(self, client: Any) -> Any:
        """The call made on ``client`` (a coroutine on an aiobotocore client)."""
        return getattr(client, self.operation)(**self.args)


Plan = Generator[Call, Any, T]


@dataclass(frozen=True)
class _Answer:
    """What a call gave the plan: its result, or the error it raised."""

    result: Any = None
    error: Exception | None = None


@dataclass(frozen=True)
class _Done:
    value: Any


def _resume(plan: Plan[T], answer: _Answer | None = None) -> Call | _Done:
    """The plan's next call, or what it returned, once ``answer`` is handed to it."""
    try:
        if answer is None:
            return next(plan)
        if answer.error is not None:
            return plan.throw(answer.error)
        return plan.send(answer.result)
    except StopIteration as stop:
        return _Done(stop.value)


def drive(plan: Plan[T], execute: Callable[[Call], Any]) -> T:
    """Run ``plan``, making each call with ``execute``."""
    step = _resume(plan)
    while isinstance(step, Call):
        try:
            answer = _Answer(result=execute(step))
        except Exception as exc:  # noqa: BLE001  (handed to the plan, which re-raises what it does not handle)
            answer = _Answer(error=exc)
        step = _resume(plan, answer)
    return step.value


async def adrive(plan: Plan[T], execute: Callable[[Call], Awaitable[Any]]) -> T:
    """:func:`drive` with awaited calls."""
    step = _resume(plan)
    while isinstance(step, Call):
        try:
            answer = _Answer(result=await execute(step))
        except Exception as exc:  # noqa: BLE001  (handed to the plan, which re-raises what it does not handle)
            answer = _Answer(error=exc)
        step = _resume(plan, answer)
    return step.value


def register_plan(stream_arn: str, name: str, what: str) -> Plan[dict[str, Any]]:
    """Register ``name``, or describe it when it is registered already (idempotent); the raw Consumer."""
    try:
        return (yield Call("register_stream_consumer", {"StreamARN": stream_arn, "ConsumerName": name}))["Consumer"]
    except ClientError as exc:
        if error_code(exc) == "ResourceInUseException":
            try:
                out = yield Call("describe_stream_consumer", {"StreamARN": stream_arn, "ConsumerName": name})
            except ClientError as missing:
                if error_code(missing) == "ResourceNotFoundException":
                    raise not_active_yet(what) from exc
                raise
            return out["ConsumerDescription"]
        if error_code(exc) == "LimitExceededException":
            listed = yield Call("list_stream_consumers", {"StreamARN": stream_arn, "MaxResults": 100})
            raise limit_or_rate(what, stream_arn, listed.get("Consumers", [])) from exc
        raise


def listing_plan(stream_arn: str) -> Plan[list[ConsumerDescription]]:
    """Every consumer of the stream (all pages; a repeated NextToken ends the listing)."""
    consumers: list[ConsumerDescription] = []
    request: dict[str, Any] = {"StreamARN": stream_arn, "MaxResults": 100}
    seen: set[str] = set()
    while True:
        out = yield Call("list_stream_consumers", request)
        page = [consumer_from(c) for c in out.get("Consumers", ())]
        consumers.extend(page)
        token = out.get("NextToken")
        if not token or not page or token in seen:  # LocalStack repeats the last name as a token
            return consumers
        seen.add(token)
        request = {"StreamARN": stream_arn, "NextToken": token, "MaxResults": 100}


@dataclass(frozen=True)
class ActiveWait:
    """Waiting for a consumer to become ACTIVE (AWS: seconds; a consumer cannot subscribe before)."""

    endpoint: str
    timeout_s: float
    deadline: float

    @classmethod
    def starting_now(cls, endpoint: str, timeout_s: float) -> ActiveWait:
        return cls(endpoint, timeout_s, time.monotonic() + timeout_s)

    def done(self, consumer: ConsumerDescription) -> bool:
        """True once ACTIVE; False to describe it again; raises when the time is up."""
        if consumer.status == "ACTIVE":
            return True
        if time.monotonic() > self.deadline:
            raise wait_timeout(consumer, self.timeout_s, self.endpoint)
        return False
