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


class StreamRecreatedError(KinesisSourceError):
    """A checkpoint or lease table belongs to another stream: deleted and recreated, or renamed.

    Not retriable: the recorded positions name shards and sequence numbers
    of the old stream. The message says how to start fresh.
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
    """An HTTP answer's body ended before the length its Content-Length announced.

    The connection broke mid-answer (a reset peer, a proxy that gave up); the
    bytes that did arrive are not the service's answer. Retriable like a reset:
    the same request is sent again. A body that arrived whole but does not
    parse is :class:`MalformedResponseError` instead, which is not retriable.
    """

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
    """A complete response body (GetRecords, ListShards, ...) did not have the documented shape.

    Not retriable: the service answered, and asking again gets the same answer.
    A body cut short by a broken connection is :class:`TruncatedResponseError`.
    """


class MalformedAggregateError(KinesisSourceError):
    """A KPL aggregated record failed its MD5 check or does not parse, and strict de-aggregation was asked for.

    Without strict mode such a record is passed through whole, with a
    warning and a counter, as the KCL does.
    """


class DataLossError(KinesisSourceError):
    """Records between two positions are gone (trimmed past retention)."""


class LineageListingError(KinesisSourceError):
    """The stream's listing is not a consistent shard lineage (gap, overlap, conflict).

    Usually a listing caught mid-reshard: the lease coordinator tries again at
    its next cycle.
    """


# --- leases --------------------------------------------------------------------


class LeaseTableNotFoundError(ResourceNotFoundError):
    """The DynamoDB lease table does not exist (or was deleted while in use)."""


class IncompatibleLeaseTableError(KinesisSourceError):
    """A table with the lease table's name exists but has another key schema.

    Not retriable: the table was made by something else (a KCL application,
    another tool). Pick another ``leaseTableName`` or delete that table.
    """


class CorruptLeaseError(KinesisSourceError):
    """An item in the lease table does not have the attributes kinesis-src wrote.

    Raised instead of skipping the item: a silently skipped lease is a shard
    nobody reads. ``key`` is the item's primary key, ``attribute`` the bad
    attribute, ``expected`` what should be there.
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

    The write was conditional on the lease's owner and counter (the fencing
    token) and the condition failed: another worker took the lease, or it was
    released or ended. Never retriable: the caller must stop processing the
    shard; the new owner resumes from the last checkpoint that did succeed.
    """

    def __init__(self, message: str, shard_id: str) -> None:
        super().__init__(message)
        self.shard_id = shard_id


class WorkerIdInUseError(KinesisSourceError):
    """Another live process heartbeats under this worker id.

    Worker ids must be unique per process; the newer process wins and the
    older one stops with this error.
    """


# --- Spark ---------------------------------------------------------------------


class ApplicationInUseError(ConfigurationError):
    """Another running query already uses this applicationName on this stream."""


# --- enhanced fan-out ------------------------------------------------------------


class ConsumerLimitError(KinesisSourceError):
    """The stream already has the 20 enhanced fan-out consumers AWS allows per stream.

    Not retriable: only deregistering a consumer frees a slot. The message
    names the stream, its consumers, and the command that deregisters one.
    """


class ConsumerStreamMismatchError(ConfigurationError):
    """A consumer ARN registered on one stream was given to read another stream's shards.

    Consumer names are per stream, so one name on two streams is two
    consumers and never a conflict. The real mistake is a consumer ARN
    carried over from another stream (configuration, a cached ARN): shard
    ids repeat across streams, so the subscription would read the *other*
    stream's shard of the same id.
    """


class SubscriptionBusyError(ThrottledError):
    """SubscribeToShard was refused for now (ResourceInUseException or LimitExceededException).

    AWS allows one SubscribeToShard per second per shard and consumer, and
    refuses a new one within 5 s of the last successful one, or while another
    subscription of the same consumer reads the shard. Retriable, with a
    backoff of at least a second.
    """

    retriable = True


class SubscriptionFailedError(KinesisSourceError):
    """A SubscribeToShard event stream failed with an error code kinesis-src has no rule for.

    Retriable: only that shard resubscribes where its cursor stands, with backoff. A reader gives up
    after several in a row with no event between (docs/efo.md, "Errors on the event stream").
    ``code`` is the code AWS sent.
    """

    retriable = True

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class EncryptionKeyError(KinesisSourceError):
    """The stream's KMS key cannot decrypt its records: disabled, deleted, in a key state that forbids
    use, or the account has no KMS subscription.

    Not retriable: only the key's owner can fix it. The message names the shard, the consumer and the fix.
    """


class FanOutUnsupportedError(KinesisSourceError):
    """The endpoint does not implement enhanced fan-out (kinesis-mock, kinesalite, ...).

    Not retriable: use real Kinesis or LocalStack, or consumerMode=polling.
    """


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
