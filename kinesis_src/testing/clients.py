"""Kinesis clients for tests on emulators: timeouts for a loaded machine, create and delete that survive retries.

On a busy machine an emulator (LocalStack most of all, whose first Kinesis
call also starts its engine) can carry a call out and answer after the
client gave up. The retry then meets what the first attempt did: CreateStream
gets ResourceInUseException ("already exists"), DeleteStream
ResourceNotFoundException. After an attempt that may have landed unanswered,
:func:`create_stream` and :func:`delete_stream` take those answers as the
work done; without one they stay errors, so a name really taken is still
reported. :class:`IdempotentKinesisClient` is a KinesisClient whose own
``create_stream`` / ``delete_stream`` behave so: the kit's fixtures hand it
out, so a test's ``kinesis.create_stream(...)`` is safe too.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable

from ..aws import KinesisClient
from ..config import AwsSettings
from ..errors import (
    EndpointUnreachableError,
    InvalidRequestError,
    KinesisSourceError,
    ResourceNotFoundError,
    RetriesExhaustedError,
    ServiceUnavailableError,
    StreamNotFoundError,
    TruncatedResponseError,
)
from ..retry import NO_RETRY, RetryPolicy, call_with_retry

log = logging.getLogger(__name__)

# LocalStack holds a Kinesis call behind the start of its engine for up to
# 60 s (its KinesisServerManager's limit); a busy machine slows every answer.
LOADED_READ_TIMEOUT_S = 90.0
# Quick retries for quick failures, and a deadline long enough for two
# attempts that each wait the whole read timeout.
LOADED_RETRY = RetryPolicy(max_attempts=8, initial_backoff_s=0.05, max_backoff_s=1.0, deadline_s=240.0)

# Errors after which the call may have been carried out: no answer, a cut
# answer, a 5xx (LocalStack's gateway answers 500 when its engine is late).
_MAY_HAVE_LANDED = (EndpointUnreachableError, TruncatedResponseError, ServiceUnavailableError)
IN_USE = "ResourceInUseException"


def emulator_settings(region: str, kinesis: str, dynamodb: str | None = None) -> AwsSettings:
    """AwsSettings for test endpoints, with :data:`LOADED_READ_TIMEOUT_S` and :data:`LOADED_RETRY`."""
    return AwsSettings(region=region, endpoint_url=kinesis, dynamodb_endpoint_url=dynamodb,
                       retry=LOADED_RETRY, read_timeout_s=LOADED_READ_TIMEOUT_S)


def create_stream(kinesis: Any, name: str, shards: int) -> None:
    """CreateStream ``name``; "already exists" after an attempt that may have landed means it did."""
    def landed(error: KinesisSourceError) -> bool:
        return isinstance(error, InvalidRequestError) and IN_USE in str(error) and _status(kinesis, name) is not None

    _retried(kinesis, f"CreateStream {name!r}", lambda once: once.create_stream(name, shards), landed)


def delete_stream(kinesis: Any, name: str) -> None:
    """DeleteStream ``name``; "not found" (or "in use" while DELETING) after an attempt that may have landed is done."""
    def landed(error: KinesisSourceError) -> bool:
        if isinstance(error, ResourceNotFoundError):
            return True
        return isinstance(error, InvalidRequestError) and IN_USE in str(error) and _status(kinesis, name) in (None, "DELETING")

    _retried(kinesis, f"DeleteStream {name!r}", lambda once: once.delete_stream(name), landed)


def _retried(kinesis: Any, what: str, call: Callable[[Any], None],
             landed: Callable[[KinesisSourceError], bool]) -> None:
    """``call`` one attempt at a time under ``kinesis``'s retry policy, so each unanswered attempt is seen.

    A client that is not a KinesisClient (an in-memory fake) is called once, as it is.
    """
    if not isinstance(kinesis, KinesisClient):
        call(kinesis)
        return
    once = KinesisClient(replace(kinesis.settings, retry=NO_RETRY), getattr(kinesis, "session", None))
    unanswered: list[KinesisSourceError] = []

    def attempt() -> None:
        try:
            call(once)
        except KinesisSourceError as raised:
            error = _unwrapped(raised)
            if unanswered and not error.retriable and landed(error):
                log.info("%s: an earlier attempt went unanswered (%s) but had landed; done", what, unanswered[-1])
                return
            if isinstance(error, _MAY_HAVE_LANDED):
                unanswered.append(error)
            if error is raised:
                raise
            raise error  # retriable again, for the policy below

    call_with_retry(attempt, what, kinesis.settings.retry)


def _unwrapped(error: KinesisSourceError) -> KinesisSourceError:
    """The error of the one attempt (a one-attempt client wraps a retriable one in RetriesExhaustedError)."""
    last = getattr(error, "last_error", None) if isinstance(error, RetriesExhaustedError) else None
    return last if isinstance(last, KinesisSourceError) else error


def _status(kinesis: KinesisClient, name: str) -> str | None:
    """The stream's status, or None if there is no such stream."""
    try:
        return kinesis.describe_stream(name).status
    except StreamNotFoundError:
        return None


class IdempotentKinesisClient(KinesisClient):
    """A KinesisClient whose ``create_stream`` and ``delete_stream`` survive their own landed retries.

    Everything else is KinesisClient's. For tests and demos: the kit's
    fixtures return one, so tests creating streams directly are covered.
    """

    def __init__(self, settings: AwsSettings, session: Any = None) -> None:
        super().__init__(settings, session)
        self.session = session

    def create_stream(self, stream: str, shard_count: int) -> None:
        create_stream(self, stream, shard_count)

    def delete_stream(self, stream: str) -> None:
        delete_stream(self, stream)
