"""Every error kinesis-src raises, under one root.

Each class carries a ``retriable`` flag. The one retry helper
(:mod:`kinesis_src.retry`) reads only that flag, so whether an error is worth
retrying is decided once, here, instead of in every loop that calls AWS.

Messages name the thing that went wrong (stream, shard, endpoint, option) and
what to check; they never contain credentials.
"""

from __future__ import annotations


class KinesisSourceError(Exception):
    """Root of every kinesis-src error."""

    retriable: bool = False


# --- configuration and input -------------------------------------------------


class ConfigurationError(KinesisSourceError, ValueError):
    """A setting or option is missing or malformed; fix the caller's input."""


class InvalidPositionError(ConfigurationError):
    """A start/end position (timestamp, sequence number, keyword) is malformed."""


# --- resources -----------------------------------------------------------------


class ResourceNotFoundError(KinesisSourceError):
    """A stream, shard or table named by the caller does not exist."""


class StreamNotFoundError(ResourceNotFoundError):
    """The stream does not exist in this account/region/endpoint."""


class ShardNotFoundError(ResourceNotFoundError):
    """The shard id is not part of the stream (never was, or trimmed)."""


class AccessDeniedError(KinesisSourceError):
    """Credentials are missing, invalid, or lack a permission."""


class InvalidRequestError(KinesisSourceError):
    """AWS rejected the request's arguments; retrying cannot help."""


# --- transient -----------------------------------------------------------------


class ThrottledError(KinesisSourceError):
    """A per-shard or per-account limit was hit; back off and retry."""

    retriable = True


class ServiceUnavailableError(KinesisSourceError):
    """AWS answered with a 5xx; usually transient."""

    retriable = True


class EndpointUnreachableError(KinesisSourceError):
    """No HTTP answer (connection refused, DNS, timeout)."""

    retriable = True


class RetriesExhaustedError(KinesisSourceError):
    """A retriable error persisted past the retry budget.

    Not retriable itself: an outer loop that retried it again would multiply
    the budget the user configured.
    """

    def __init__(self, message: str, last_error: BaseException) -> None:
        super().__init__(message)
        self.last_error = last_error


# --- reading -------------------------------------------------------------------


class IteratorExpiredError(KinesisSourceError):
    """A shard iterator outlived its 5 minutes; the reader re-acquires one.

    Not retriable by the generic helper: retrying the same call with the same
    expired iterator can never succeed. The shard reader handles it by asking
    for a fresh iterator after the last sequence number it delivered.
    """


class MalformedResponseError(KinesisSourceError):
    """A GetRecords/ListShards body did not have the documented shape."""


class DataLossError(KinesisSourceError):
    """Records between two positions are gone (trimmed past retention)."""


class LineageOrderError(KinesisSourceError):
    """Someone asked to read a child shard before its parents were drained."""
