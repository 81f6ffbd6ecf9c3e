"""Every error kinesis-src raises, under one root; ``retriable`` alone decides a retry.

Messages name what went wrong and what to check, never credentials.
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


class StreamRecreatedError(KinesisSourceError):
    """A checkpoint or lease table belongs to another stream: deleted and recreated, or renamed.

    Not retriable (its positions are the old stream's); the message says how to start fresh.
    """


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


class TruncatedResponseError(KinesisSourceError):
    """An HTTP body ended before its Content-Length; retriable like a connection reset."""

    retriable = True


class RetriesExhaustedError(KinesisSourceError):
    """A retriable error outlived the retry budget; not retriable (retries would multiply)."""

    def __init__(self, message: str, last_error: BaseException) -> None:
        super().__init__(message)
        self.last_error = last_error


# --- reading -------------------------------------------------------------------


class IteratorExpiredError(KinesisSourceError):
    """A shard iterator expired; the shard reader, not the retry helper, gets a fresh one."""


class MalformedResponseError(KinesisSourceError):
    """A complete response body lacks the documented shape; not retriable (same answer again)."""


class MalformedAggregateError(KinesisSourceError):
    """A KPL aggregate failed its MD5 check or does not parse, with strict de-aggregation asked for.

    Without strict mode such a record is passed through whole, with a warning, as the KCL does.
    """


class DataLossError(KinesisSourceError):
    """Records between two positions are gone (trimmed past retention)."""


class LineageListingError(KinesisSourceError):
    """The listing is not a consistent lineage; usually mid-reshard, retried at the next cycle."""


# --- leases --------------------------------------------------------------------


class LeaseTableNotFoundError(ResourceNotFoundError):
    """The DynamoDB lease table does not exist (or was deleted while in use)."""


class IncompatibleLeaseTableError(KinesisSourceError):
    """A table with the lease table's name exists but has another key schema.

    Not retriable (a KCL application's or another tool's): pick another ``leaseTableName``.
    """


class CorruptLeaseError(KinesisSourceError):
    """An item in the lease table does not have the attributes kinesis-src wrote.

    Raised, never skipped: a skipped lease is a shard nobody reads. ``key``, ``attribute`` and
    ``expected`` name the item, the bad attribute and what should be there.
    """

    def __init__(self, table: str, key: dict[str, str], attribute: str, expected: str, found: str) -> None:
        self.table = table
        self.key = dict(key)
        self.attribute = attribute
        self.expected = expected
        self.found = found
        where = ", ".join(f"{k}={v!r}" for k, v in key.items())
        super().__init__(
            f"corrupt item in lease table {table!r} ({where}): attribute {attribute!r} {found}; "
            f"expected {expected}. Fix or delete the item (see docs/leases.md, 'Inspecting a table')."
        )


class LeaseLostError(KinesisSourceError):
    """A checkpoint or progress write by a worker that no longer holds the lease.

    Its fencing condition (owner and counter) failed. Never retriable: stop processing the
    shard; the new owner resumes from the last checkpoint that succeeded.
    """

    def __init__(self, message: str, shard_id: str) -> None:
        super().__init__(message)
        self.shard_id = shard_id


class WorkerIdInUseError(KinesisSourceError):
    """Another live process heartbeats under this worker id; the older process stops."""


# --- Spark ---------------------------------------------------------------------


class ApplicationInUseError(ConfigurationError):
    """Another running query already uses this applicationName on this stream."""


# --- enhanced fan-out ------------------------------------------------------------


class ConsumerLimitError(KinesisSourceError):
    """The stream already has the 20 enhanced fan-out consumers AWS allows per stream.

    Not retriable: the message names the stream's consumers and how to deregister one.
    """


class ConsumerStreamMismatchError(ConfigurationError):
    """A consumer ARN registered on one stream was given to read another stream's shards.

    Shard ids repeat across streams, so it would read the *other* stream's shard of that id.
    """


class SubscriptionBusyError(ThrottledError):
    """SubscribeToShard refused for now; retriable (docs/efo.md, "Lifecycle", "Refusals and outages")."""


    retriable = True


class SubscriptionFailedError(KinesisSourceError):
    """A SubscribeToShard event stream failed with an error code kinesis-src has no rule for.

    Retriable: that shard resubscribes where its cursor stands (docs/efo.md). ``code``: AWS's code.
    """

    retriable = True

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class EncryptionKeyError(KinesisSourceError):
    """The stream's KMS key cannot decrypt its records (disabled, deleted, or not allowed).

    Not retriable: only the key's owner can fix it; the message names the shard and the fix.
    """


class FanOutUnsupportedError(KinesisSourceError):
    """The endpoint has no enhanced fan-out (kinesis-mock, ...); use consumerMode=polling."""


# --- sticky key ranges ----------------------------------------------------------


class KeyRangeInUseError(ConfigurationError):
    """A consumer's sticky key range overlaps another live worker's claim on the same application and
    stream (a different range). Workers with and without a key range may share an application
    (docs/consumer.md, "Sticky key ranges")."""


class KeyRangeClaimLostError(KinesisSourceError):
    """This worker's key-range claim was removed (its renewals stopped for the failover time, so
    another worker judged it dead): a worker with an overlapping range may be reading its keys."""


# --- parallel processing (Consumer.process) ----------------------------------------


class RecordNotProcessedError(KinesisSourceError):
    """A record was rejected, or failed ``max_delivery_attempts`` times, and ``process()`` has no
    ``dead_letter`` to put it in: processing stops rather than skip it. The record is not
    checkpointed (its next owner delivers it again); ``__cause__`` is the handler's last error."""
