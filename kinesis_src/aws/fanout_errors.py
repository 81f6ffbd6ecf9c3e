"""Answers only enhanced fan-out has, as kinesis-src errors (over :func:`.boundary.translate`).

Both fan-out clients wrap their calls in :func:`mapped_errors` and their event streams in
:func:`event_stream`, so both map the same answers the same way (docs/efo.md)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import urllib3.exceptions
from botocore.eventstream import NoInitialResponseError
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from ..errors import (
    AccessDeniedError,
    ConsumerLimitError,
    EncryptionKeyError,
    EndpointUnreachableError,
    FanOutUnsupportedError,
    KinesisSourceError,
    ResourceNotFoundError,
    ServiceUnavailableError,
    SubscriptionBusyError,
    SubscriptionFailedError,
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
        return _busy(what, code)
    return None


def stream_error(error: Exception, what: str, endpoint: str) -> KinesisSourceError:
    """An error while reading events: the subscription is over; the caller resubscribes from its continuation."""
    mapped = fanout_error(error, what, endpoint, subscribing=True)
    if mapped is not None:
        return mapped
    if isinstance(error, (urllib3.exceptions.HTTPError, OSError)) or _is_aiohttp_error(error):
        return EndpointUnreachableError(f"{what}: the event stream from {endpoint} broke off ({type(error).__name__})")
    code = error_code(error)
    if code in EVENT_STREAM_ERRORS:
        return EVENT_STREAM_ERRORS[code](Failure(what, code, _message(error), endpoint))
    translated = translate(error, what, endpoint)
    if code is not None and type(translated) is KinesisSourceError:  # a code no rule knows
        return SubscriptionFailedError(
            f"{what}: the event stream from {endpoint} failed with {code} ({_message(error)}), an error "
            "kinesis-src has no rule for: resubscribing where the shard's reader stands", code
        )
    return translated


@dataclass(frozen=True)
class Failure:
    """An error AWS sent on an event stream: the call it ended, its code and message, the endpoint."""

    what: str
    code: str
    message: str
    endpoint: str

    def __str__(self) -> str:
        return f"{self.what}: {self.code}: {self.message}"


def _message(error: BaseException) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Message") or "").strip() or "no message"
    return str(error)


def _busy(what: str, code: str) -> SubscriptionBusyError:
    return SubscriptionBusyError(
        f"{what}: {code}: AWS allows one subscription per shard and consumer, and a new one at most "
        "once per second (5 s after the last): retrying"
    )


def _transient(kind: type[KinesisSourceError]) -> Callable[[Failure], KinesisSourceError]:
    return lambda failure: kind(
        f"{failure} (a transient failure of the event stream from {failure.endpoint}): resubscribing where "
        "the shard's reader stands"
    )


def _key(fix: str) -> Callable[[Failure], KinesisSourceError]:
    return lambda failure: EncryptionKeyError(
        f"{failure}. The stream's records are encrypted with a KMS key that cannot be used: {fix}"
    )


def _gone(failure: Failure) -> KinesisSourceError:
    return ResourceNotFoundError(
        f"{failure} (endpoint {failure.endpoint}). The consumer, its stream or the shard is gone (consumer "
        "deregistered, stream deleted, shard trimmed past retention). Check with `aws kinesis "
        "describe-stream-consumer --consumer-arn ARN`; a reader registers its consumer again when it starts."
    )


def _kms_access(failure: Failure) -> KinesisSourceError:
    return AccessDeniedError(
        f"{failure}. The credentials may not use the stream's KMS key: grant kms:Decrypt on that key to the "
        "reader's role (docs/iam.md)."
    )


EVENT_STREAM_ERRORS: dict[str, Callable[[Failure], KinesisSourceError]] = {
    "InternalFailureException": _transient(ServiceUnavailableError),
    "KMSThrottlingException": _transient(ThrottledError),
    "ResourceInUseException": lambda failure: _busy(failure.what, failure.code),  # taken over: see fanout_error
    "ResourceNotFoundException": _gone,
    "KMSAccessDeniedException": _kms_access,
    "KMSDisabledException": _key("it is disabled; enable it (`aws kms enable-key --key-id KEY`)."),
    "KMSInvalidStateException": _key(
        "its key state does not allow decryption (pending deletion, pending import, unavailable); cancel "
        "the deletion or restore the key material (`aws kms describe-key --key-id KEY` shows the state)."
    ),
    "KMSNotFoundException": _key(
        "it no longer exists; records encrypted with it cannot be read. Encrypt new records with an "
        "existing key (`aws kinesis start-stream-encryption`)."
    ),
    "KMSOptInRequired": _key("the account has no AWS KMS subscription; subscribe the account to KMS."),
}
"""Every error AWS documents on the SubscribeToShard event stream, by code, and how its kinesis-src
error is built: transient ones retriable, configuration ones naming the fix."""


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


@contextmanager
def named_error(message: Any | None) -> Iterator[None]:
    """Around botocore's parse of an event-stream error message: raise it with the code botocore
    drops for an exception type its model does not list (from the raw message, else "(no code)")."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.setdefault("Error", {})
        headers = {} if message is None else message.headers
        if not error.get("Code"):
            error["Code"] = headers.get(":exception-type") or headers.get(":error-code") or "(no code)"
        if not error.get("Message") and message is not None:
            error["Message"] = headers.get(":error-message") or _payload_message(message.payload)
        raise


def _payload_message(payload: bytes) -> str:
    try:
        body = json.loads(payload or b"{}")
    except ValueError:
        return ""
    return str(body.get("message") or body.get("Message") or "") if isinstance(body, dict) else ""


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
