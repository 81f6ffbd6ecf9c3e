"""Kinesis clients for tests on emulators: patient timeouts, and retry-safe create and delete.

Landed but unanswered calls count as done (docs/testing.md, "Streams and resharding").
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

# Longer than LocalStack holds a Kinesis call while its engine starts; a busy machine is slow too.
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
    """``call`` an attempt at a time under ``kinesis``'s retry policy (a fake: once, as is)."""
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
    """A KinesisClient whose ``create_stream`` and ``delete_stream`` survive landed retries."""


    def __init__(self, settings: AwsSettings, session: Any = None) -> None:
        super().__init__(settings, session)
        self.session = session

    def create_stream(self, stream: str, shard_count: int) -> None:
        create_stream(self, stream, shard_count)

    def delete_stream(self, stream: str) -> None:
        delete_stream(self, stream)
