"""Answers only enhanced fan-out has, mapped to kinesis-src errors (on top of :func:`.boundary.translate`).

A refused subscription (:class:`SubscriptionBusyError`, retried at least a
second apart), the consumer limit (:class:`ConsumerLimitError`), endpoints
without EFO (:class:`FanOutUnsupportedError`) and an event stream that
broke off (:class:`EndpointUnreachableError`). The two context managers are
what the botocore and aiobotocore clients wrap their calls and event
streams in, so both map the same answers the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, TypeVar

import urllib3.exceptions
from botocore.eventstream import NoInitialResponseError
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from ..errors import (
    ConsumerLimitError,
    EndpointUnreachableError,
    FanOutUnsupportedError,
    KinesisSourceError,
    SubscriptionBusyError,
    ThrottledError,
)
from .boundary import translate
from .fanout_model import CONSUMER_LIMIT, ConsumerDescription

S = TypeVar("S")

_UNSUPPORTED_CODES = frozenset({"UnknownOperationException", "UnknownOperation", "InvalidAction"})
_BUSY_CODES = frozenset({"ResourceInUseException", "LimitExceededException"})


def error_code(error: BaseException) -> str | None:
    """The AWS error code of a ClientError; None for anything else."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or "") or None
    return None


def unsupported(what: str, endpoint: str, detail: str) -> FanOutUnsupportedError:
    return FanOutUnsupportedError(
        f"{what}: the endpoint {endpoint} does not support enhanced fan-out ({detail}). EFO needs real "
        "Kinesis or LocalStack (`python localstack/localstack_host.py start`); with this endpoint use "
        "consumerMode=polling."
    )


def fanout_error(error: BaseException, what: str, endpoint: str, *, subscribing: bool = False) -> KinesisSourceError | None:
    """The kinesis-src error for an answer specific to EFO, or None to leave it to :func:`.boundary.translate`."""
    if isinstance(error, NoInitialResponseError) or (
        isinstance(error, ResponseParserError) and "initial-response" in str(error)
    ):
        # kinesis-mock answers SubscribeToShard with events but no initial-response event.
        return unsupported(what, endpoint, "its SubscribeToShard answer has no initial-response event")
    code = error_code(error)
    if code in _UNSUPPORTED_CODES:
        return unsupported(what, endpoint, code)
    if subscribing and code in _BUSY_CODES:
        return SubscriptionBusyError(
            f"{what}: {code}: AWS allows one subscription per shard and consumer, and a new one at most "
            "once per second (5 s after the last): retrying"
        )
    return None


def stream_error(error: Exception, what: str, endpoint: str) -> KinesisSourceError:
    """An error while reading events: the subscription is over; the caller resubscribes from its continuation."""
    mapped = fanout_error(error, what, endpoint, subscribing=True)
    if mapped is not None:
        return mapped
    if isinstance(error, (urllib3.exceptions.HTTPError, OSError)) or _is_aiohttp_error(error):
        return EndpointUnreachableError(f"{what}: the event stream from {endpoint} broke off ({type(error).__name__})")
    return translate(error, what, endpoint)


def _is_aiohttp_error(error: BaseException) -> bool:
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiobotocore depends on it
        return False
    return isinstance(error, aiohttp.ClientError)


@contextmanager
def mapped_errors(what: str, endpoint: str, *, subscribing: bool = False) -> Iterator[None]:
    """Raise an EFO-specific answer as its kinesis-src error; leave every other one to the retry boundary."""
    try:
        yield
    except Exception as exc:
        mapped = fanout_error(exc, what, endpoint, subscribing=subscribing)
        if mapped is None:
            raise
        raise mapped from exc


@contextmanager
def event_stream(stream: S, what: str, endpoint: str) -> Iterator[S]:
    """An open event stream, closed on the way out; an error while reading it is raised translated, never swallowed."""
    try:
        yield stream
    except Exception as exc:
        raise stream_error(exc, what, endpoint) from exc
    finally:
        stream.close()  # type: ignore[attr-defined]


def consumer_limit(stream_arn: str, names: list[str]) -> ConsumerLimitError:
    return ConsumerLimitError(
        f"stream {stream_arn} already has {len(names)} enhanced fan-out consumers, the most AWS allows per "
        f"stream ({CONSUMER_LIMIT}): {', '.join(sorted(names))}. Deregister unused ones, e.g. `aws kinesis "
        f"deregister-stream-consumer --stream-arn {stream_arn} --consumer-name NAME` (or "
        "kinesis_src.aws.FanOut(...).deregister_consumer), or read with consumerMode=polling."
    )


def not_active_yet(what: str) -> ThrottledError:
    return ThrottledError(f"{what}: ResourceInUseException and no such consumer: the stream is not ACTIVE yet")


def limit_or_rate(what: str, stream_arn: str, consumers: list[dict[str, Any]]) -> KinesisSourceError:
    """LimitExceededException on RegisterStreamConsumer is either the 20-consumer limit or a rate limit."""
    if len(consumers) >= CONSUMER_LIMIT:
        return consumer_limit(stream_arn, [c["ConsumerName"] for c in consumers])
    return ThrottledError(f"{what}: LimitExceededException with {len(consumers)} consumers: rate limited")


def wait_timeout(consumer: ConsumerDescription, timeout_s: float, endpoint: str) -> KinesisSourceError:
    return KinesisSourceError(
        f"consumer {consumer.arn} still {consumer.status} after {timeout_s:.0f}s at {endpoint}"
    )
